package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pgBin is $DROVER_PG_BIN, else the newest of Debian's PostgreSQL versions.
func pgBin() (string, error) {
	if p := os.Getenv("DROVER_PG_BIN"); p != "" {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var best string
	bestV := -1
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || v <= bestV {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			best, bestV = d, v
		}
	}
	if best == "" {
		return "", errors.New("PostgreSQL not found under /usr/lib/postgresql (make cluster-deps installs Debian's)")
	}
	return best, nil
}

// pgUser is who runs PostgreSQL: the postgres account when this process is
// root (postgres refuses root), else this process's own user.
func pgUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL runs as user postgres, which is missing (make cluster-deps): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// pgConf is appended to initdb's postgresql.conf: production-shaped (every
// commit is flushed to disk and waited for), modestly sized.
const pgConf = `
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 300
shared_buffers = 256MB
effective_cache_size = 1GB
fsync = on
synchronous_commit = on
full_page_writes = on
max_wal_size = 2GB
checkpoint_timeout = 5min
log_min_messages = warning
log_checkpoints = on
`

func (c *Cluster) startPostgres() error {
	cred, err := pgUser()
	if err != nil {
		return err
	}
	sock := filepath.Join(c.Dir, "pg")
	data := filepath.Join(sock, "data")
	if err := os.MkdirAll(sock, 0o700); err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(sock, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	asPG := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(c.opts.PGBin, name), args...)
		cmd.Dir = sock
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		return cmd
	}
	if out, err := asPG("initdb", "-D", data, "-U", "postgres", "-E", "UTF8", "--no-locale",
		"--auth-local=trust", "--auth-host=scram-sha-256").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if c.PGPort, err = FreePort(); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, pgConf, c.PGPort, sock)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The postmaster is this process's child, not pg_ctl's daemon: should
	// this process die, it shuts down at once (SIGQUIT) with it.
	cmd := asPG("postgres", "-D", data)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	logFile := filepath.Join(sock, "postgres.log")
	if c.pg, err = startChild(cmd, logFile); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.psql("CREATE ROLE " + clusterDBUser + " LOGIN CREATEDB PASSWORD '" + clusterDBPassword + "'")
		if err == nil {
			return nil
		}
		if c.pg.exited() || time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			return fmt.Errorf("postgres not ready: %v\n%s", err, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// psql runs one statement as the superuser over the unix socket.
func (c *Cluster) psql(stmt string) error {
	cmd := exec.Command(filepath.Join(c.opts.PGBin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-h", filepath.Join(c.Dir, "pg"), "-p", strconv.Itoa(c.PGPort), "-U", "postgres", "-d", "postgres", "-c", stmt)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("psql: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// createSchemas creates the server's two databases and applies the schemas
// embedded in temporal-sql-tool, as the server's docs set up a cluster.
func (c *Cluster) createSchemas() error {
	for _, db := range []struct{ name, schema string }{
		{"temporal", "postgresql/v12/temporal"},
		{"temporal_visibility", "postgresql/v12/visibility"},
	} {
		for _, step := range [][]string{
			{"create-database"},
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "--schema-name", db.schema},
		} {
			args := append([]string{"--plugin", "postgres12", "--ep", "127.0.0.1", "-p", strconv.Itoa(c.PGPort),
				"-u", clusterDBUser, "--pw", clusterDBPassword, "--db", db.name}, step...)
			if out, err := exec.Command(c.opts.SQLTool, args...).CombinedOutput(); err != nil {
				return fmt.Errorf("temporal-sql-tool %s %s: %v\n%s", db.name, step[0], err, out)
			}
		}
	}
	return nil
}
