package proc

import (
	"strings"
	"testing"
)

func TestCheckRemotePath(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"/data/app/app.conf", "/data/app/app.conf", ""},
		{"/data//app/./app.conf", "/data/app/app.conf", ""},
		{"/data/app/dir/", "/data/app/dir", ""},
		{"data/app.conf", "", "absolute"},
		{"", "", "required"},
		{"/data/../etc/passwd", "", "'..'"},
		{"/data/app/..", "", "'..'"},
		{"/data/a\nb", "", "control"},
		{"/", "", "root"},
		{"/data/..foo", "/data/..foo", ""},
	} {
		got, err := CheckRemotePath(c.in)
		if c.err == "" && (err != nil || got != c.want) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("CheckRemotePath(%q) = %q, %v; want %q, error with %q", c.in, got, err, c.want, c.err)
		}
	}
}

func TestSetConfigFileReplacesOrAdds(t *testing.T) {
	f := PushFile{Path: "/a", Mode: 0o600, Content: FileRef{SHA256: "s", MD5: "m", Size: 1}}
	cm := SetConfigFile([]ConfigFile{{Path: "/a", MD5: "old"}, {Path: "/b", MD5: "x"}}, f)
	if len(cm) != 2 || cm[0].MD5 != "m" || cm[0].Source == nil || cm[0].Source.SHA256 != "s" || cm[0].Mode != 0o600 || cm[1].MD5 != "x" {
		t.Fatalf("replace: %+v", cm)
	}
	cm = SetConfigFile(nil, f)
	if len(cm) != 1 || cm[0].Path != "/a" || cm[0].MD5 != "m" {
		t.Fatalf("add: %+v", cm)
	}
}
