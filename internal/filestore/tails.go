package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"gocloud.dev/blob"

	"github.com/drover-sh/drover/proc"
)

// Log tails too long to come back in a result are kept under their own
// prefix. Many hosts' results may name one tail (a fleet's logs often end
// alike), and a result can be read again (`starter result`), so a reader
// never deletes one: a tail expires TailKeep after it was last written,
// and the workers that write tails sweep the expired ones.
const (
	TailKeep = 24 * time.Hour
	// sweepEvery bounds the listing a worker does to sweep.
	sweepEvery = time.Hour
)

// PutTail stores a log tail of at most max bytes. Writing it again renews
// its lifetime. Now and then it sweeps expired tails as well.
func (s Store) PutTail(ctx context.Context, text string, max int64) (proc.FileRef, error) {
	ref, err := s.put(ctx, tailPrefix, strings.NewReader(text), max)
	if err == nil && s.sweepDue(time.Now()) {
		// In the background: a slow listing must not hold up a result.
		go func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_, _ = s.SweepTails(sctx, time.Now().Add(-TailKeep))
		}()
	}
	return ref, err
}

// ReadTail reads a stored tail whole.
func (s Store) ReadTail(ctx context.Context, ref proc.FileRef) (string, error) {
	r, err := s.open(ctx, tailPrefix, ref)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", fmt.Errorf("log tail %s is not in the content store %s: tails are kept %s after they were read from the host (%s)",
				ref.SHA256, s.s.where, TailKeep, Shared)
		}
		return "", err
	}
	defer r.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, r); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (s Store) sweepDue(now time.Time) bool {
	if s.s == nil {
		return false
	}
	s.s.mu.Lock()
	defer s.s.mu.Unlock()
	if now.Sub(s.s.swept) < sweepEvery {
		return false
	}
	s.s.swept = now
	return true
}

// SweepTails deletes the tails last written before cutoff and returns how
// many it deleted.
func (s Store) SweepTails(ctx context.Context, cutoff time.Time) (int, error) {
	if s.s == nil {
		return 0, ErrNotConfigured
	}
	n := 0
	it := s.s.b.List(&blob.ListOptions{Prefix: tailPrefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, s.wrap(err)
		}
		if obj.IsDir || !obj.ModTime.Before(cutoff) {
			continue
		}
		if err := s.s.b.Delete(ctx, obj.Key); err == nil {
			n++
		}
	}
}
