package filestore

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
)

// Location is where a content store is: a directory (Dir), or an object
// store's bucket URL (URL, s3://...).
type Location struct {
	Dir string
	URL string
}

// String names the store as a URL, for messages.
func (l Location) String() string {
	switch {
	case l.URL != "":
		return l.URL
	case l.Dir == "":
		return "none"
	}
	return "file://" + l.Dir
}

// Shared is the hint every "not in the store" answer carries: the default
// store is per user and per machine.
const Shared = "starters, the HTTP server and workers must use one content store: the default directory is " +
	"per user, so it is shared only by a starter and a worker running as the same user on one machine; " +
	"otherwise set content_store to one object store for all of them (s3://BUCKET?region=...)"

// Locate picks the content store the settings name: content_store (a
// file:// or s3:// URL), or files_dir (a directory), or, with neither, the
// per-user default directory.
func Locate(contentStore, filesDir string) (Location, error) {
	switch {
	case contentStore != "" && filesDir != "":
		return Location{}, errors.New("content_store and files_dir: give one, not both (files_dir DIR is content_store file://DIR)")
	case filesDir != "":
		dir, err := filepath.Abs(filesDir)
		if err != nil {
			return Location{}, fmt.Errorf("files_dir %q: %w", filesDir, err)
		}
		return Location{Dir: dir}, nil
	case contentStore != "":
		return parseURL(contentStore)
	}
	dir, err := DefaultDir()
	if err != nil {
		return Location{}, fmt.Errorf("content_store: no default directory (%v); set content_store or files_dir", err)
	}
	return Location{Dir: dir}, nil
}

func parseURL(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url's error quotes the whole URL, credentials and all.
		return Location{}, errors.New("content_store: not a URL (want s3://BUCKET?region=... or file:///DIR)")
	}
	bad := func(format string, args ...any) (Location, error) {
		shown := *u
		shown.User = nil // never echo a secret
		return Location{}, fmt.Errorf("content_store %q: %s", shown.String(), fmt.Sprintf(format, args...))
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" || !filepath.IsAbs(u.Path) || u.RawQuery != "" {
			return bad("want file:///ABSOLUTE/DIR, with no host and no parameters")
		}
		return Location{Dir: filepath.Clean(u.Path)}, nil
	case "s3":
		switch {
		case u.Host == "":
			return bad("want s3://BUCKET[?region=...&endpoint=...&use_path_style=true]")
		case u.User != nil:
			// Keys in a setting end up in shell histories and process lists.
			return bad("must not hold credentials: they come from the AWS environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, ~/.aws, an instance role)")
		case strings.Trim(u.Path, "/") != "":
			return bad("names a bucket only, not a path in it")
		}
		return Location{URL: s}, nil
	}
	return bad("the scheme must be file:// or s3:// (AWS, MinIO, Ceph, SeaweedFS and other S3-compatible stores)")
}

// DefaultDir is the per-user content store: $XDG_DATA_HOME/drover/content,
// or ~/.local/share/drover/content, which a starter and a worker running as
// the same user on one machine both find.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "drover", "content"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		// A service started without $HOME still has a home directory.
		u, uerr := user.Current()
		if uerr != nil || u.HomeDir == "" {
			return "", err
		}
		home = u.HomeDir
	}
	return filepath.Join(home, ".local", "share", "drover", "content"), nil
}
