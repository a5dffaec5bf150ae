package inventory

import (
	"context"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ReloadDelay is how long a changed file must stay quiet before it is read
// again: an editor's save, or a generator writing in steps, is one change.
const ReloadDelay = 300 * time.Millisecond

// Live keeps an Inventory current with its file and the sources it names:
// a change to any of them, or Reload (a SIGHUP), loads them again and swaps
// the result in whole. An inventory that does not load leaves the last good
// one in place, and says why in the log.
type Live struct {
	path   string
	inv    *Inventory
	logger *slog.Logger
	// apply takes a loaded inventory before it is swapped in; its error
	// keeps the last good one.
	apply func(next *Inventory) error

	mu       sync.Mutex // one reload at a time
	warnings []string   // last logged
}

// NewLive serves inv, loaded from path, and reloads it from there. apply,
// when set, is given each loaded inventory before it is swapped in (the
// worker points its SSH transport at the new known_hosts there); its error
// keeps the last good one.
func NewLive(path string, inv *Inventory, logger *slog.Logger, apply func(next *Inventory) error) *Live {
	l := &Live{path: path, inv: inv, logger: logger, apply: apply}
	l.logWarnings(inv.Warnings())
	return l
}

// Reload loads the inventory again now, changed or not, as a SIGHUP asks.
func (l *Live) Reload() error { return l.reload("signal", true) }

// reload loads and swaps; unforced, an unchanged inventory is left alone.
func (l *Live) reload(reason string, force bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	next, err := Load(l.path)
	if err == nil && !force && sameInventory(l.inv.view(), next.view()) {
		return nil
	}
	if err == nil && l.apply != nil {
		err = l.apply(next)
	}
	if err != nil {
		l.logger.Error("inventory not reloaded: the last good inventory stays in use", "file", l.path, "reason", reason, "err", err)
		return err
	}
	added, removed, changed := diff(l.inv.view(), next.view())
	l.inv.Replace(next)
	l.logger.Info("inventory reloaded", "file", l.path, "reason", reason, "hosts", len(next.view().order),
		"added", added, "removed", removed, "changed", changed)
	l.logWarnings(next.Warnings())
	return nil
}

// logWarnings logs what a load ignored, when it differs from last time.
func (l *Live) logWarnings(w []string) {
	if slices.Equal(w, l.warnings) {
		return
	}
	l.warnings = w
	for _, line := range w {
		l.logger.Warn("inventory: "+line, "file", l.path)
	}
}

// Watch reloads on changes to the inventory's files until ctx ends; it
// returns once watching. It watches their directories, so a file replaced
// by a rename (an editor, a generator writing a temporary file first, a
// Kubernetes ConfigMap) is seen. Where the system cannot watch, it logs
// so, and Reload still works.
func (l *Live) Watch(ctx context.Context) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		l.logger.Warn("inventory: cannot watch for changes; reload with SIGHUP", "file", l.path, "err", err)
		return
	}
	watched := map[string]bool{}
	files := l.watch(w, watched)
	go l.follow(ctx, w, watched, files)
}

// follow reloads a quiet ReloadDelay after the last event on files.
func (l *Live) follow(ctx context.Context, w *fsnotify.Watcher, watched, files map[string]bool) {
	defer w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if relevant(ev.Name, files) {
				timer.Reset(ReloadDelay)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			l.logger.Warn("inventory: watching for changes", "file", l.path, "err", err)
		case <-timer.C:
			_ = l.reload("file changed", false)
			files = l.watch(w, watched)
		}
	}
}

// watch adds the directories of the inventory's files (it may name other
// sources after a reload) and returns those files.
func (l *Live) watch(w *fsnotify.Watcher, watched map[string]bool) map[string]bool {
	files := map[string]bool{filepath.Clean(l.path): true}
	for _, f := range l.inv.Files() {
		files[filepath.Clean(f)] = true
	}
	for f := range files {
		dir := filepath.Dir(f)
		if watched[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			l.logger.Warn("inventory: cannot watch for changes; reload with SIGHUP", "dir", dir, "err", err)
			continue
		}
		watched[dir] = true
	}
	return files
}

// relevant reports an event on one of files, or on a Kubernetes
// ConfigMap's ..data link beside them, which is how a mounted ConfigMap
// changes.
func relevant(name string, files map[string]bool) bool {
	name = filepath.Clean(name)
	if files[name] {
		return true
	}
	if !strings.HasPrefix(filepath.Base(name), "..data") {
		return false
	}
	for f := range files {
		if filepath.Dir(f) == filepath.Dir(name) {
			return true
		}
	}
	return false
}

func sameInventory(a, b *snapshot) bool {
	return a.knownHosts == b.knownHosts && slices.Equal(a.order, b.order) && reflect.DeepEqual(a.hosts, b.hosts) &&
		slices.Equal(a.files, b.files) && slices.Equal(a.warnings, b.warnings)
}

// diff counts the hosts next adds, removes and changes.
func diff(prev, next *snapshot) (added, removed, changed int) {
	for id, h := range next.hosts {
		old, ok := prev.hosts[id]
		switch {
		case !ok:
			added++
		case !reflect.DeepEqual(old, h):
			changed++
		}
	}
	for id := range prev.hosts {
		if _, ok := next.hosts[id]; !ok {
			removed++
		}
	}
	return added, removed, changed
}
