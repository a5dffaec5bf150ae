package workflows

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

func TestDigestOf(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	web := proc.ProcessID{Namespace: "web", Name: "svc"}
	db := proc.ProcessID{Namespace: "db", Name: "pg"}
	entries := []Entry{
		{Process: db, Registration: proc.Registration{Expected: true}, Seen: &Sighting{At: now.Add(-time.Minute)},
			RetryAt: now.Add(10 * time.Second)},
		{Process: web, SupplierID: 2, Registration: proc.Registration{Managed: true}, Seen: &Sighting{Alive: true, Pid: 42, At: now}},
	}
	var events []Event
	// Restarts older than the window are not counted; only the newest
	// maxDigestRestarts are kept.
	events = append(events, Event{Time: now.Add(-25 * time.Hour), Process: db, Kind: EventRestartSuccess})
	for i := 0; i < 20; i++ {
		events = append(events, Event{Time: now.Add(time.Duration(i-20) * time.Minute), Process: db, Kind: EventRestartFailed})
	}
	events = append(events, Event{Time: now.Add(-time.Second), Kind: EventWatchFailed})
	events = append(events, Event{Time: now, Process: web, Kind: EventConfigDrift})
	d := DigestOf(entries, events, now)
	if len(d.Procs) != 2 || d.Omitted != 0 || d.WatchFailedAt != now.Unix()-1 {
		t.Fatalf("digest: %+v", d)
	}
	pg, svc := d.Procs[0], d.Procs[1]
	if pg.Actual != StateStopped || !pg.Expected || pg.Managed || pg.Supervised || pg.RetryAt != now.Unix()+10 ||
		len(pg.Restarts) != maxDigestRestarts || pg.Restarts[len(pg.Restarts)-1] != now.Add(-time.Minute).Unix() ||
		pg.LastEvent != EventRestartFailed {
		t.Fatalf("db/pg: %+v", pg)
	}
	if svc.Actual != StateRunning || svc.Pid != 42 || !svc.Expected || !svc.Supervised || svc.SupplierID != 2 ||
		len(svc.Restarts) != 0 || svc.LastEvent != EventConfigDrift || svc.LastEventAt != now.Unix() {
		t.Fatalf("web/svc: %+v", svc)
	}

	// However long the history, the memo stays bounded by the processes.
	many := make([]Entry, MaxDigestProcs+10)
	for i := range many {
		many[i].Process = proc.ProcessID{Namespace: "ns", Name: fmt.Sprintf("p%03d", i)}
	}
	var long []Event
	for i := 0; i < maxEvents; i++ {
		long = append(long, Event{Time: now, Process: many[0].Process, Kind: EventRestartSuccess})
	}
	d = DigestOf(many, long, now)
	b, _ := json.Marshal(d)
	if len(d.Procs) != MaxDigestProcs || d.Omitted != 10 || len(d.Procs[0].Restarts) != maxDigestRestarts || len(b) > 16<<10 {
		t.Fatalf("bounded digest: %d procs, %d omitted, %d restarts, %d bytes", len(d.Procs), d.Omitted, len(d.Procs[0].Restarts), len(b))
	}
}
