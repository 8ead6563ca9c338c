package storage

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// openTest opens a fresh database in a temp dir.
func openTest(t *testing.T) *DB {
	t.Helper()
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func tableNames(t *testing.T, sqldb *sql.DB) []string {
	t.Helper()
	rows, err := sqldb.Query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}

func TestOpenMigratesEmptyFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DBFile)
	if err := os.WriteFile(path, nil, 0o644); err != nil { // an empty file, as left by `touch`
		t.Fatal(err)
	}
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	migs, _ := loadMigrations(mustSub(t))
	if d.SchemaVersion() != len(migs) || len(migs) == 0 {
		t.Fatalf("schema version %d, want %d", d.SchemaVersion(), len(migs))
	}
	for _, want := range []string{"conversations", "kv_snapshot_blocks", "kv_snapshots", "messages", "messages_fts", "models", "prompt_tags", "prompts", "settings"} {
		if !strings.Contains(strings.Join(tableNames(t, d.SQL()), " "), want) {
			t.Errorf("table %s missing after migration: %v", want, tableNames(t, d.SQL()))
		}
	}
	var mode string
	var fk, uv, app int
	if err := d.SQL().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := d.SQL().QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}
	d.SQL().QueryRow("PRAGMA user_version").Scan(&uv)
	d.SQL().QueryRow("PRAGMA application_id").Scan(&app)
	if uv != len(migs) || app != applicationID {
		t.Errorf("user_version %d application_id %#x", uv, app)
	}
	if err := d.Check(ctx); err != nil {
		t.Error(err)
	}
	d.Close()
	// Reopening an up-to-date database changes nothing and works.
	d2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
}

func mustSub(t *testing.T) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	entries, err := embeddedMigrations.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := embeddedMigrations.ReadFile("migrations/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = &fstest.MapFile{Data: b}
	}
	return out
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DBFile)
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	future := d.SchemaVersion() + 5
	if _, err := d.SQL().Exec("PRAGMA user_version = " + itoa(future)); err != nil {
		t.Fatal(err)
	}
	d.Close()
	before, _ := os.ReadFile(path)
	_, err = Open(ctx, path)
	var se *SchemaError
	if !errors.As(err, &se) || !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open of a newer database: %v, want *SchemaError", err)
	}
	if se.Version != future || se.Known != future-5 || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "upgrade anechat") {
		t.Errorf("unhelpful error: %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("refusing a newer database modified the file")
	}
	if info, err := Inspect(ctx, path); !errors.Is(err, ErrSchemaTooNew) || info.SchemaVersion != future {
		t.Errorf("Inspect of a newer database: %+v, %v", info, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestFailedMigrationRollsBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DBFile)
	v1 := fstest.MapFS{"0001_first.sql": {Data: []byte("CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);")}}
	d, err := open(ctx, path, options{migrations: v1})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	// 0002 succeeds in its first statements, then fails; 0003 never runs.
	bad := fstest.MapFS{
		"0001_first.sql":  v1["0001_first.sql"],
		"0002_second.sql": {Data: []byte("CREATE TABLE b (y INTEGER); INSERT INTO a VALUES (2); ALTER TABLE a ADD COLUMN z INTEGER; INSERT INTO nosuch VALUES (1);")},
		"0003_third.sql":  {Data: []byte("CREATE TABLE c (z INTEGER);")},
	}
	_, err = open(ctx, path, options{migrations: bad})
	if err == nil || !strings.Contains(err.Error(), "0002_second.sql") || !strings.Contains(err.Error(), path) {
		t.Fatalf("failed migration: err = %v, want one naming 0002_second.sql and the path", err)
	}
	d, err = open(ctx, path, options{migrations: v1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.SchemaVersion() != 1 {
		t.Errorf("schema version %d after failed migration, want 1", d.SchemaVersion())
	}
	if got := strings.Join(tableNames(t, d.SQL()), ","); got != "a" {
		t.Errorf("tables after failed migration: %s, want a", got)
	}
	var n, cols int
	d.SQL().QueryRow("SELECT count(*) FROM a").Scan(&n)
	d.SQL().QueryRow("SELECT count(*) FROM pragma_table_info('a')").Scan(&cols)
	if n != 1 || cols != 1 {
		t.Errorf("table a has %d rows and %d columns, want 1 and 1", n, cols)
	}

	// The same from an empty file: nothing at all is left behind.
	path2 := filepath.Join(t.TempDir(), DBFile)
	if _, err := open(ctx, path2, options{migrations: bad}); err == nil {
		t.Fatal("failing migration from scratch succeeded")
	}
	d2, err := open(ctx, path2, options{migrations: fstest.MapFS{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if names := tableNames(t, d2.SQL()); len(names) != 0 || d2.SchemaVersion() != 0 {
		t.Errorf("after a failed first migration: tables %v, version %d", names, d2.SchemaVersion())
	}
}

func TestMigrationNamesChecked(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"0001_a.sql": {Data: []byte("SELECT 1;")}, "0003_c.sql": {Data: []byte("SELECT 1;")}},
		"bad name": {"1_a.sql": {Data: []byte("SELECT 1;")}},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations accepted it", name)
		}
	}
}

func TestCorruptFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	random := make([]byte, 8192)
	for i := range random {
		random[i] = byte(i*7919 + i>>3)
	}
	path := filepath.Join(dir, "random.db")
	os.WriteFile(path, random, 0o644)
	_, err := Open(ctx, path)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move") {
		t.Errorf("random bytes: %v, want ErrCorrupt naming the path and what to do", err)
	}

	// A valid header followed by garbage: SQLite itself reports the damage.
	good := filepath.Join(dir, "good.db")
	d, err := Open(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	b, _ := os.ReadFile(good)
	copy(b[16:], random) // keep the magic, trash the rest of the header and the schema page
	damaged := filepath.Join(dir, "damaged.db")
	os.WriteFile(damaged, b, 0o644)
	if _, err := Open(ctx, damaged); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), damaged) {
		t.Errorf("damaged database: %v, want ErrCorrupt naming the path", err)
	}

	// Some other program's SQLite database is refused, not migrated.
	other := filepath.Join(dir, "other.db")
	o, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	o.Exec("CREATE TABLE foo (x)")
	o.Close()
	if _, err := Open(ctx, other); !errors.Is(err, ErrForeign) {
		t.Errorf("foreign database: %v, want ErrForeign", err)
	}
	if _, err := Open(ctx, dir); err == nil {
		t.Error("Open of a directory succeeded")
	}
}

// TestCorruptPagesAtQueryTime damages pages in the middle of a database whose
// first page is intact: Open may still succeed, but reads and Check fail
// with ErrCorrupt naming the file, and nothing panics.
func TestCorruptPagesAtQueryTime(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DBFile)
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := d.CreateConversation(ctx, ConversationInput{Title: "big"})
	for i := range 200 {
		if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: strings.Repeat("word"+strconv.Itoa(i)+" ", 300)}); err != nil {
			t.Fatal(err)
		}
	}
	d.Close() // the last connection checkpoints the WAL into the file
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	if len(b) < 40*page {
		t.Fatalf("database only %d bytes", len(b))
	}
	for i := 10 * page; i < len(b)-page; i += 3 * page { // every third page from the 11th on
		for j := range page {
			b[i+j] = byte(j*31 + i/page)
		}
	}
	os.WriteFile(path, b, 0o644)
	d, err = Open(ctx, path)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open of a damaged database: %v, want nil or ErrCorrupt", err)
		}
		t.Logf("Open refused the damaged database: %v", err)
		return
	}
	defer d.Close()
	_, treeErr := d.Tree(ctx, c.ID)
	_, searchErr := d.SearchMessages(ctx, "word150", 10)
	checkErr := d.Check(ctx)
	if !errors.Is(checkErr, ErrCorrupt) || !strings.Contains(checkErr.Error(), path) {
		t.Errorf("Check: %v, want ErrCorrupt naming the file", checkErr)
	}
	t.Logf("tree: %v; search: %v", treeErr, searchErr)
	if !errors.Is(treeErr, ErrCorrupt) && !errors.Is(searchErr, ErrCorrupt) {
		t.Errorf("reads of damaged pages: tree %v, search %v; want ErrCorrupt", treeErr, searchErr)
	}
}

func TestOpenCancelledAndNestedPath(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "a", "b", DBFile)
	if d, err := Open(ctx, path); err == nil {
		d.Close()
		t.Error("Open with a cancelled context succeeded")
	} else if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Open: %v, want context.Canceled", err)
	}
	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open after a cancelled attempt: %v", err)
	}
	defer d.Close()
	if d.Path() != path {
		t.Errorf("Path() = %q, want %q", d.Path(), path)
	}
	if _, err := Open(context.Background(), ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty path: %v", err)
	}
}
