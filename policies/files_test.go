package policies

import (
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

func TestFileOpDeadlineGrowsWithTheBytes(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  time.Duration
	}{
		{0, time.Minute},
		{256 << 10, time.Minute + 2*time.Second},
		{proc.MaxFileSize, time.Minute + 512*time.Second},
	} {
		if got := FileOpDeadline(c.bytes); got != c.want {
			t.Errorf("FileOpDeadline(%d) = %s, want %s", c.bytes, got, c.want)
		}
	}
	if n := PushBytes([]proc.PushFile{{Content: proc.FileRef{Size: 3}}, {Content: proc.FileRef{Size: 4}}}); n != 7 {
		t.Errorf("PushBytes = %d, want 7", n)
	}
}
