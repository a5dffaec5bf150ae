package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Source formats: host lists kept by other tools.
const (
	FormatAnsible = "ansible" // the JSON `ansible-inventory --list` prints
	FormatCMDB    = "cmdb"    // a BlueKing CMDB host list
)

// Source is a host list another tool keeps, named under the inventory's
// sources. Its hosts take the inventory's defaults and cloud bastions as
// the file's own hosts do.
type Source struct {
	Format string `koanf:"format"`
	File   string `koanf:"file"`
	// CloudID is the cloud area of an Ansible inventory's hosts, which
	// Ansible has no word for; CMDB hosts carry their own.
	CloudID int `koanf:"bk_cloud_id"`
}

// read parses the source's hosts; i is its place under sources, for errors.
// The warning lists what it ignored, or is empty.
func (src Source) read(dir string, i int) (hosts []entry, warning, path string, err error) {
	if src.File == "" {
		return nil, "", "", fmt.Errorf("file: required (the host list to read)")
	}
	path = src.File
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	where := fmt.Sprintf("sources[%d] (%s %s)", i, src.Format, path)
	var parse func([]byte, string) ([]entry, []string, error)
	switch src.Format {
	case FormatAnsible:
		if src.CloudID < 0 {
			return nil, "", path, fmt.Errorf("bk_cloud_id %d: must be >= 0", src.CloudID)
		}
		parse = func(data []byte, where string) ([]entry, []string, error) {
			return parseAnsible(data, where, src.CloudID)
		}
	case FormatCMDB:
		parse = parseCMDB
	default:
		return nil, "", path, fmt.Errorf("format %q: must be %q or %q", src.Format, FormatAnsible, FormatCMDB)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", path, fmt.Errorf("file: %w", err)
	}
	hosts, ignored, err := parse(data, where)
	if err != nil {
		return nil, "", path, fmt.Errorf("%s: %w", path, err)
	}
	if len(ignored) > 0 {
		warning = fmt.Sprintf("%s: ignored %s", where, strings.Join(ignored, ", "))
	}
	return hosts, warning, path, nil
}

// sortedKeys lists a set's members in order, for messages.
func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
