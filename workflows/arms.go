package workflows

import (
	"context"
	"sync"
	"time"
)

// armBatchWindow is how long a worker gathers arms of one shard before
// sending them: arms after a fleet op come within it, and a watch armed
// this much later is still polled within its first interval.
const armBatchWindow = 200 * time.Millisecond

// armBatcher gathers the arms a worker makes of each shard and sends them
// together, each caller waiting for its own arm's send.
type armBatcher struct {
	send func(ctx context.Context, shard, watchQueue string, arms []ShardArm) error
	mu   sync.Mutex
	open map[string]*armBatch
}

// armBatch is one shard's arms on their way.
type armBatch struct {
	watchQueue string
	arms       []ShardArm
	done       chan struct{}
	err        error
}

func newArmBatcher(send func(ctx context.Context, shard, watchQueue string, arms []ShardArm) error) *armBatcher {
	return &armBatcher{send: send, open: map[string]*armBatch{}}
}

// arm adds in's arm to its shard's open batch, or opens one, and waits
// until that batch is sent; its error is every member's.
func (b *armBatcher) arm(ctx context.Context, in ArmInput) error {
	b.mu.Lock()
	batch, ok := b.open[in.Shard]
	if !ok {
		batch = &armBatch{watchQueue: in.WatchQueue, done: make(chan struct{})}
		b.open[in.Shard] = batch
		go b.flush(in.Shard, batch)
	}
	batch.arms = append(batch.arms, in.Arm)
	b.mu.Unlock()
	select {
	case <-batch.done:
		return batch.err
	case <-ctx.Done():
		return ctx.Err()
	}
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
