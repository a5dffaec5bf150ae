package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// cmdbHost is the part of a CMDB host record drover reads.
type cmdbHost struct {
	HostID  *int64  `json:"bk_host_id"`
	CloudID *int    `json:"bk_cloud_id"`
	InnerIP *string `json:"bk_host_innerip"`
	AgentID string  `json:"bk_agent_id"`
}

// cmdbEntry is one element of a host list: a record of list_biz_hosts_topo
// ({"host": {...}, "topo": [...]}) or a bare host record (list_biz_hosts,
// list_hosts_without_biz).
type cmdbEntry struct {
	Host *cmdbHost `json:"host"`
	Topo []struct {
		Set    string `json:"bk_set_name"`
		Module []struct {
			Name string `json:"bk_module_name"`
		} `json:"module"`
	} `json:"topo"`
	cmdbHost
}

// parseCMDB reads a BlueKing CMDB host list: the API's whole response, its
// data ({"count", "info"}) or the info array. A host's identity is
// (bk_cloud_id, the first address of bk_host_innerip); its sets and
// modules, where the list has them, are its groups, as SET, MODULE and
// SET/MODULE. Logins and keys are the inventory's defaults.
func parseCMDB(data []byte, where string) ([]entry, []string, error) {
	info, field, err := cmdbInfo(data)
	if err != nil {
		return nil, nil, err
	}
	out := make([]entry, 0, len(info))
	for i, raw := range info {
		var e cmdbEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		rec, at := e.cmdbHost, fmt.Sprintf("%s[%d]", field, i)
		if e.Host != nil {
			rec, at = *e.Host, at+".host"
		}
		h, err := rec.host()
		if err != nil {
			return nil, nil, fmt.Errorf("%s.%w", at, err)
		}
		seen := map[string]bool{}
		for _, t := range e.Topo {
			seen[t.Set] = true
			for _, m := range t.Module {
				seen[m.Name], seen[t.Set+"/"+m.Name] = true, true
			}
		}
		delete(seen, "")
		h.Groups = sortedKeys(seen)
		out = append(out, entry{fmt.Sprintf("%s %s (bk_host_innerip %s)", where, at, h.IP), h})
	}
	return out, nil, nil
}

// cmdbInfo finds the host records and names the field that holds them.
func cmdbInfo(data []byte) ([]json.RawMessage, string, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var info []json.RawMessage
		if err := json.Unmarshal(data, &info); err != nil {
			return nil, "", fmt.Errorf("not a CMDB host list: %w", err)
		}
		return info, "", nil
	}
	var doc struct {
		Result  *bool              `json:"result"`
		Message string             `json:"message"`
		Data    *json.RawMessage   `json:"data"`
		Info    *[]json.RawMessage `json:"info"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, "", fmt.Errorf("not a CMDB host list: %w", err)
	}
	switch {
	case doc.Result != nil && !*doc.Result:
		return nil, "", fmt.Errorf("result: false: the CMDB answered %q, not a host list", doc.Message)
	case doc.Data != nil:
		var d struct {
			Info *[]json.RawMessage `json:"info"`
		}
		if err := json.Unmarshal(*doc.Data, &d); err != nil || d.Info == nil {
			return nil, "", fmt.Errorf("data.info: missing; want the response of list_biz_hosts_topo, list_biz_hosts or list_hosts_without_biz")
		}
		return *d.Info, "data.info", nil
	case doc.Info != nil:
		return *doc.Info, "info", nil
	}
	return nil, "", fmt.Errorf("info: missing; want a CMDB response, its data ({\"count\", \"info\"}) or the info array")
}

// host is the record's identity and agent id.
func (r cmdbHost) host() (Host, error) {
	if r.InnerIP == nil {
		return Host{}, fmt.Errorf("bk_host_innerip: missing")
	}
	if r.CloudID == nil {
		return Host{}, fmt.Errorf("bk_cloud_id: missing")
	}
	ip, _, _ := strings.Cut(*r.InnerIP, ",")
	h := Host{IP: strings.TrimSpace(ip), CloudID: *r.CloudID, AgentID: r.AgentID}
	if h.IP == "" {
		return Host{}, fmt.Errorf("bk_host_innerip: empty; a host needs an inner ip")
	}
	if r.HostID != nil {
		h.Labels = map[string]string{"bk_host_id": strconv.FormatInt(*r.HostID, 10)}
	}
	return h, nil
}
