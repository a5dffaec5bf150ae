//go:build scale

package e2e

// The scale tests write hundreds of thousands of history events: with
// SQLite's default journal, every write syncs the disk, and the dev server's
// one shard spends the run waiting on it. The bench runs the server this
// way too; nothing here tests durability.
func init() { serverPragmas = []string{"journal_mode=wal", "synchronous=normal"} }
