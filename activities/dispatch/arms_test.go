package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/drover-sh/drover/workflows"
)

// TestArmsOfOneShardGoTogether: arms a worker makes of one shard close
// together reach it in one send; each shard gets its own; a failed send
// fails each of its arms.
func TestArmsOfOneShardGoTogether(t *testing.T) {
	var mu sync.Mutex
	sends := map[string][][]workflows.ShardArm{}
	b := newArmBatcher(func(_ context.Context, shard, _ string, arms []workflows.ShardArm) error {
		mu.Lock()
		defer mu.Unlock()
		sends[shard] = append(sends[shard], arms)
		if shard == "broken" {
			return errors.New("shard unreachable")
		}
		return nil
	})
	var wg sync.WaitGroup
	errs := make([]error, 30)
	for i := range errs {
		shard := []string{"a", "b", "broken"}[i%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.arm(context.Background(), workflows.ArmInput{Shard: shard, Arm: workflows.ShardArm{Host: fmt.Sprintf("host:0:10.0.0.%d", i), Gen: 1}})
		}()
	}
	wg.Wait()
	for shard, batches := range sends {
		if len(batches) != 1 || len(batches[0]) != 10 {
			t.Errorf("shard %s: %d sends of %v, want one of its 10 arms", shard, len(batches), batches)
		}
	}
	var failed []int
	for i, err := range errs {
		if err != nil {
			failed = append(failed, i%3)
		}
	}
	sort.Ints(failed)
	if len(failed) != 10 || failed[0] != 2 || failed[9] != 2 {
		t.Fatalf("arms that failed, by shard: %v, want the broken shard's 10", failed)
	}
}

// TestADisarmIsNotWaitedFor: a disarm returns before its batch is sent,
// and carries the generation it ends to the shard; an arm returns only
// once its batch is sent.
func TestADisarmIsNotWaitedFor(t *testing.T) {
	entered, release := make(chan []workflows.ShardArm, 2), make(chan struct{})
	d := &Dispatcher{}
	d.armsOnce.Do(func() {
		d.arms = newArmBatcher(func(_ context.Context, _, _ string, arms []workflows.ShardArm) error {
			entered <- arms
			<-release
			return nil
		})
	})
	disarm := workflows.ArmInput{Shard: "s", Arm: workflows.ShardArm{Host: "host:0:10.0.0.1"}, Ends: 4}
	if err := d.ArmWatch(context.Background(), disarm); err != nil {
		t.Fatal(err)
	}
	if sent := <-entered; len(sent) != 1 || sent[0] != (workflows.ShardArm{Host: "host:0:10.0.0.1", Ends: 4}) {
		t.Fatalf("sent %+v, want the disarm ending generation 4", sent)
	}
	armed := make(chan error, 1)
	go func() {
		armed <- d.ArmWatch(context.Background(), workflows.ArmInput{Shard: "s", Arm: workflows.ShardArm{Host: "host:0:10.0.0.1", Gen: 5}})
	}()
	<-entered
	select {
	case err := <-armed:
		t.Fatalf("the arm returned (%v) while its batch was being sent", err)
	default:
	}
	close(release)
	if err := <-armed; err != nil {
		t.Fatal(err)
	}
}
