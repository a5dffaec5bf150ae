package transport

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/drover-sh/drover/inventory"
)

// endpoint is one SSH login: where and with which credentials.
type endpoint struct {
	Addr, User, IdentityFile, CertificateFile, PasswordEnv, PassphraseEnv string
}

func (e endpoint) String() string { return e.User + "@" + e.Addr }

// poolKey names a pooled connection. Credentials are part of it so that
// one host entry's working key never hides another's broken one.
type poolKey struct {
	target  endpoint
	bastion endpoint // zero when direct
}

func keyFor(h inventory.Host) poolKey {
	k := poolKey{target: endpoint{Addr: h.DialAddress(), User: h.User, IdentityFile: h.IdentityFile,
		CertificateFile: h.CertificateFile, PasswordEnv: h.PasswordEnv, PassphraseEnv: h.PassphraseEnv}}
	if b := h.Bastion; b != nil {
		k.bastion = endpoint{Addr: b.Address, User: b.User, IdentityFile: b.IdentityFile,
			CertificateFile: b.CertificateFile, PasswordEnv: b.PasswordEnv, PassphraseEnv: b.PassphraseEnv}
	}
	return k
}

// poolEntry is a connection being dialled or established. ready closes
// when the dial ends; c or err is set by then. Concurrent first users wait
// on the same entry, so a host gets one handshake.
type poolEntry struct {
	ready chan struct{}
	c     *conn
	err   error
}

// conn is one pooled, authenticated connection.
type conn struct {
	key    poolKey
	client *ssh.Client
	sem    chan struct{} // session slots for commands
	kills  chan struct{} // extra slots for the sessions that kill commands
	done   chan struct{} // closed when evicted
	once   sync.Once
	// lastUsed is when a Run last took or gave back this connection, or a
	// bastion's last rider left it, in unix nanoseconds.
	lastUsed atomic.Int64
	// via is the bastion connection this one tunnels through, nil when
	// direct. riders counts the connections tunnelling through this one,
	// dials in flight included: closing a bastion drops every tunnel
	// through it at once, so one with riders is never closed as idle.
	// riders only grows under SSH.mu, so a trim never races a new rider.
	via    *conn
	riders atomic.Int32
}

// killSlots is the headroom left between MaxSessionsPerHost's default and
// OpenSSH's MaxSessions: a cancelled command's session stays counted until
// its process dies, so its kill session needs a slot of its own.
const killSlots = 2

// shut closes c; it reports whether this call was the one that did.
func (c *conn) shut() (closed bool) {
	c.once.Do(func() {
		closed = true
		close(c.done)
		_ = c.client.Close()
		if c.via != nil {
			c.via.release()
		}
	})
	return closed
}

// release ends one rider's use of bastion c. The bastion's idle time
// starts when its last rider leaves, not when it was last dialled through.
func (c *conn) release() {
	c.lastUsed.Store(time.Now().UnixNano())
	c.riders.Add(-1)
}

// idle reports that c may be closed to save resources: no command or kill
// session on it and no connection tunnelling through it. SSH.mu is held.
func (c *conn) idle() bool {
	return len(c.sem) == 0 && len(c.kills) == 0 && c.riders.Load() == 0
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// get returns the pooled connection for key, dialling it if needed.
func (s *SSH) get(ctx context.Context, key poolKey) (*conn, error) {
	addr := key.target.Addr
	s.mu.Lock()
	if s.close {
		s.mu.Unlock()
		return nil, &Error{Kind: KindUnreachable, Host: addr, Err: ErrClosed}
	}
	e := s.pool[key]
	if e != nil {
		select {
		case <-e.ready:
			if e.c != nil && e.c.alive() {
				e.c.lastUsed.Store(time.Now().UnixNano())
				s.mu.Unlock()
				s.poolHits.Add(1)
				return e.c, nil
			}
			e = nil // evicted or failed; dial again
		default:
		}
	}
	if e == nil {
		e = &poolEntry{ready: make(chan struct{})}
		s.pool[key] = e
		s.wg.Add(1)
		go s.dialEntry(key, e)
	}
	s.mu.Unlock()

	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, &Error{Kind: KindUnreachable, Host: addr, Err: fmt.Errorf("not connected before the deadline: %w", ctx.Err())}
	}
	if e.err != nil {
		return nil, e.err
	}
	e.c.lastUsed.Store(time.Now().UnixNano())
	return e.c, nil
}

// dialEntry dials in the background, independent of any one caller's
// context, so an impatient caller does not fail the others waiting.
func (s *SSH) dialEntry(key poolKey, e *poolEntry) {
	defer s.wg.Done()
	c, err := s.dialOrRetry(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.close {
		c.shut()
		c, err = nil, &Error{Kind: KindUnreachable, Host: key.target.Addr, Err: ErrClosed}
	}
	e.c, e.err = c, err
	if err != nil && s.pool[key] == e {
		delete(s.pool, key) // failures are not cached: the next Run dials again
	}
	close(e.ready)
	if c != nil {
		c.lastUsed.Store(time.Now().UnixNano())
		s.wg.Add(2)
		go s.watch(c)
		go s.keepAlive(c)
		for _, old := range s.overCapLocked(c) {
			go func() {
				if old.shut() {
					s.trims.Add(1)
				}
			}()
		}
	}
}

// overCapLocked removes from the pool, least recently used first, the idle
// connections beyond MaxPooled and returns them for closing. Neither a
// connection with a session open nor a bastion with connections through it
// is ever among them, nor fresh, the one just dialled for a waiting Run;
// the pool then stays above the cap until they become idle. A Run that
// took a connection just before it was trimmed finds it closed before its
// command was sent, and dials afresh.
func (s *SSH) overCapLocked(fresh *conn) []*conn {
	excess := len(s.pool) - s.opts.MaxPooled
	if s.opts.MaxPooled <= 0 || excess <= 0 {
		return nil
	}
	var idle []*conn
	for _, e := range s.pool {
		select {
		case <-e.ready:
			if e.c != nil && e.c != fresh && e.c.idle() {
				idle = append(idle, e.c)
			}
		default:
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUsed.Load() < idle[j].lastUsed.Load() })
	if len(idle) > excess {
		idle = idle[:excess]
	}
	for _, c := range idle {
		delete(s.pool, c.key)
	}
	return idle
}

// closeIdle closes idle connections past IdleTimeout until Close. A pass
// runs every half IdleTimeout, at most every minute, so a connection closes
// at most that long after its timeout.
func (s *SSH) closeIdle() {
	defer s.wg.Done()
	every := min(s.opts.IdleTimeout/2, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.closeIdleAt(now)
		}
	}
}

// closeIdleAt closes the connections idle (see conn.idle) and unused since
// before now minus IdleTimeout. A bastion's riders close first; it follows
// on a later pass, once its own idle time has run from their leaving.
func (s *SSH) closeIdleAt(now time.Time) {
	cutoff := now.Add(-s.opts.IdleTimeout).UnixNano()
	var old []*conn
	s.mu.Lock()
	for key, e := range s.pool {
		select {
		case <-e.ready:
			if e.c != nil && e.c.idle() && e.c.lastUsed.Load() < cutoff {
				delete(s.pool, key)
				old = append(old, e.c)
			}
		default:
		}
	}
	s.mu.Unlock()
	for _, c := range old {
		if c.shut() {
			s.idleClosed.Add(1)
		}
	}
}

// ride returns the pooled connection to bastion b with one more rider,
// which the caller hands on to the connection it dials through it, or
// releases if that dial fails.
func (s *SSH) ride(b endpoint) (*conn, error) {
	key := poolKey{target: b}
	for attempt := 0; ; attempt++ {
		bc, err := s.get(s.ctx, key)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		// Trimmed between get and here: it is about to close.
		pooled := s.pool[key] != nil && s.pool[key].c == bc && bc.alive()
		if pooled {
			bc.riders.Add(1)
		}
		s.mu.Unlock()
		if pooled {
			return bc, nil
		}
		if attempt == 2 {
			return nil, &Error{Kind: KindUnreachable, Host: b.Addr, Err: errors.New("connection closed as soon as it was made")}
		}
	}
}

// evict drops c from the pool and closes it.
func (s *SSH) evict(c *conn) {
	s.mu.Lock()
	if e := s.pool[c.key]; e != nil && e.c == c {
		delete(s.pool, c.key)
	}
	s.mu.Unlock()
	if c.shut() {
		s.evictions.Add(1)
	}
}

// watch evicts c as soon as the server or network closes it.
func (s *SSH) watch(c *conn) {
	defer s.wg.Done()
	_ = c.client.Wait()
	s.evict(c)
}

// keepAlive evicts c when a keepalive goes unanswered for one interval: a
// silently dead peer (host down, network cut, process frozen) is otherwise
// noticed only when a command hangs.
func (s *SSH) keepAlive(c *conn) {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			// OpenSSH answers unknown global requests with a failure; any
			// answer proves the peer is alive.
			_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		timer := time.NewTimer(s.opts.KeepAlive)
		select {
		case err := <-reply:
			timer.Stop()
			if err != nil {
				s.evict(c)
				return
			}
		case <-timer.C:
			s.evict(c)
			return
		case <-c.done:
			timer.Stop()
			return
		}
	}
}
