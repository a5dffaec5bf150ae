package dispatch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/workflows"
)

// armBatchWindow is how long a worker gathers arms of one shard before
// sending them: arms after a fleet op come within it, and a watch armed
// this much later is still polled within its first interval.
const armBatchWindow = 200 * time.Millisecond

// armBatcher gathers the arms a worker makes of each shard and sends them
// together, each caller waiting for its own arm's send.
type armBatcher struct {
	send func(ctx context.Context, shard, watchQueue string, arms []workflows.ShardArm) error
	mu   sync.Mutex
	open map[string]*armBatch
}

// armBatch is one shard's arms on their way.
type armBatch struct {
	watchQueue string
	arms       []workflows.ShardArm
	done       chan struct{}
	err        error
}

func newArmBatcher(send func(ctx context.Context, shard, watchQueue string, arms []workflows.ShardArm) error) *armBatcher {
	return &armBatcher{send: send, open: map[string]*armBatch{}}
}

// arm adds in's arm to its shard's batch and waits until that batch is
// sent; its error is every member's.
func (b *armBatcher) arm(ctx context.Context, in workflows.ArmInput) error {
	batch := b.add(in)
	select {
	case <-batch.done:
		return batch.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add puts in's arm in its shard's open batch, or opens one.
func (b *armBatcher) add(in workflows.ArmInput) *armBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch, ok := b.open[in.Shard]
	if !ok {
		batch = &armBatch{watchQueue: in.WatchQueue, done: make(chan struct{})}
		b.open[in.Shard] = batch
		go b.flush(in.Shard, batch)
	}
	batch.arms = append(batch.arms, in.Arm)
	return batch
}

// flush sends a batch once its window has passed. The send has a context
// of its own: the callers that wait for it may give up, another still
// waits.
func (b *armBatcher) flush(shard string, batch *armBatch) {
	time.Sleep(armBatchWindow)
	b.mu.Lock()
	delete(b.open, shard)
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), armSendTimeout)
	defer cancel()
	batch.err = b.send(ctx, shard, batch.watchQueue, batch.arms)
	close(batch.done)
}

// armSendTimeout bounds one batch's send, within an arm's own 30 s.
const armSendTimeout = 20 * time.Second

// ArmWatch arms a host's shard, starting the shard workflow if it is not
// running; a disarm of a shard that is not running is done already. Arms
// a worker makes close together go to their shard in one signal: after a
// fleet op, hundreds of hosts arm at once, and each signal is a write.
//
// A disarm is sent but not waited for: the host's workflow task, and with
// it the answer to the op that ended the watch, would wait out the
// batch's window. A disarm is advice: a shard that never gets it asks
// the host, which answers nothing armed, and one that gets it after a
// newer arm keeps that arm (ShardArm.Ends).
func (d *Dispatcher) ArmWatch(ctx context.Context, in workflows.ArmInput) error {
	switch {
	case d.Acts == nil:
	case in.Arm.Gen == 0 && in.Ends > 0:
		activities.EndWatch(d.Acts, in.Arm.Host, in.Ends)
	case in.Watch != nil:
		activities.HandOffWatch(d.Acts, in.Arm.Host, in.Arm.Gen, *in.Watch)
	}
	d.armsOnce.Do(func() { d.arms = newArmBatcher(d.sendArms) })
	if in.Arm.Gen != 0 {
		return d.arms.arm(ctx, in)
	}
	in.Arm.Ends = in.Ends
	batch := d.arms.add(in)
	if activity.IsActivity(ctx) {
		logger := activity.GetLogger(ctx)
		go func() {
			<-batch.done
			if batch.err != nil {
				logger.Warn("a disarm did not reach its shard, which will ask the host instead", "shard", in.Shard, "host", in.Arm.Host, "error", batch.err)
			}
		}()
	}
	return nil
}

// sendArms hands a shard the arms of one batch.
func (d *Dispatcher) sendArms(ctx context.Context, shard, watchQueue string, arms []workflows.ShardArm) error {
	joins := slices.ContainsFunc(arms, func(a workflows.ShardArm) bool { return a.Gen != 0 })
	if !joins {
		err := d.Client.SignalWorkflow(ctx, shard, "", workflows.ShardArmsSignal, arms)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	_, err := d.Client.SignalWithStartWorkflow(ctx, shard, workflows.ShardArmsSignal, arms, client.StartWorkflowOptions{
		ID: shard, TaskQueue: d.TaskQueue, WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.WatchShardWorkflowName, workflows.ShardState{ID: shard, WatchQueue: watchQueue})
	return err
}
