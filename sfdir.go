package questdbexporter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// isDefaultSFDir reports whether sf_dir is the default storage area, whose
// missing parents the exporter creates (it is no typo); an sf_dir the user
// chose must sit in an existing directory.
func (c *Config) isDefaultSFDir() bool {
	return c.SFDir != "" && filepath.Clean(c.SFDir) == defaultSFDir
}

// checkSFDir tells, without changing anything, whether prepareSFDir would
// fail on this machine, with what to create or fix: Validate runs it, so
// `otelcol validate` says so before a start fails (as file_storage checks
// its directory). sf_dir may be missing: the start creates it.
func checkSFDir(dir string, isDefault bool) error {
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("sf_dir: %q is not a directory; point sf_dir at a directory (the slot is <sf_dir>/<sender_id>/)", dir)
	case !errors.Is(err, fs.ErrNotExist) && !isNotDir(err):
		return fmt.Errorf("sf_dir: %q: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	if !isDefault {
		pfi, perr := os.Stat(parent)
		switch {
		case perr == nil && pfi.IsDir():
			return nil
		case perr == nil || isNotDir(perr):
			return fmt.Errorf("sf_dir: %q: %q is not a directory; fix sf_dir", dir, parent)
		}
		return fmt.Errorf("sf_dir: %q does not exist and neither does its parent %q; the exporter creates sf_dir but never its parent, "+
			"so that a mistyped path cannot start an empty queue beside the one holding your data: "+
			"create %s, owned by the collector's user, or fix sf_dir (\"\" selects memory-only mode)", dir, parent, parent)
	}
	// The default is created with its parents: the nearest existing
	// ancestor must be a directory this process can write.
	for a := parent; ; a = filepath.Dir(a) {
		afi, aerr := os.Stat(a)
		switch {
		case aerr == nil && !afi.IsDir(), isNotDir(aerr):
			return fmt.Errorf("sf_dir: the default %q cannot be created: %q is not a directory; set sf_dir to a directory (\"\" selects memory-only mode)", dir, a)
		case aerr == nil && !writable(a):
			return fmt.Errorf("sf_dir: the default %q cannot be created: %q is not writable by this user (uid %d); "+
				"create %s owned by the collector's user (for example: sudo install -d -o <user> %s), "+
				"or set sf_dir to a writable directory (\"\" selects memory-only mode)", dir, a, os.Getuid(), parent, parent)
		case aerr == nil:
			return nil
		case a == filepath.Dir(a):
			return fmt.Errorf("sf_dir: %q: %w", dir, aerr)
		}
	}
}

// isNotDir reports whether a stat failed because a path element is a file.
func isNotDir(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && errors.Is(pe.Err, errNotDir)
}

// prepareSFDir makes sure sf_dir can hold the slot: sf_dir is created when
// missing (and that is logged); an sf_dir the user chose needs its parent to
// exist, so a mistyped path fails the start instead of starting an empty
// queue unnoticed beside the one holding data; the default is created with
// its parents, so the minimal configuration starts on a fresh machine.
func prepareSFDir(dir string, isDefault bool, logger *zap.Logger) error {
	if err := checkSFDir(dir, isDefault); err != nil {
		return fmt.Errorf("questdb exporter: %w", err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	if isDefault {
		// Parents as a package would make them (0755): they are the
		// collector's storage area, shared with file_storage.
		if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
			return fmt.Errorf("questdb exporter: creating the parent of sf_dir %q: %w", dir, err)
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("questdb exporter: creating sf_dir %q: %w", dir, err)
	}
	logger.Info("created sf_dir for the store-and-forward queue", zap.String("sf_dir", dir))
	return nil
}
