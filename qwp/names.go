package qwp

import (
	"fmt"
	"unicode/utf8"
)

// The name rules mirror what a QuestDB server accepts, so that a frame never
// fails on a name: 127 bytes on the wire (else PARSE_ERROR) and the engine's
// character rules (else the table or column cannot be created).

// checkTableName reports why name cannot be a QuestDB table name.
func checkTableName(name string) error {
	if err := checkNameCommon("table", name); err != nil {
		return err
	}
	if name[0] == ' ' || name[len(name)-1] == ' ' {
		return fmt.Errorf("qwp: table name %q starts or ends with a space", name)
	}
	if name[0] == '.' || name[len(name)-1] == '.' {
		return fmt.Errorf("qwp: table name %q starts or ends with '.'", name)
	}
	for i := 1; i < len(name); i++ {
		if name[i] == '.' && name[i-1] == '.' {
			return fmt.Errorf("qwp: table name %q contains \"..\"", name)
		}
	}
	return nil
}

// checkColumnName reports why name cannot be a QuestDB column name. The
// empty name (designated timestamp) is handled by the caller.
func checkColumnName(name string) error {
	if err := checkNameCommon("column", name); err != nil {
		return err
	}
	for _, r := range name {
		if r == '.' || r == '-' {
			return fmt.Errorf("qwp: column name %q contains %q, which QuestDB forbids in column names", name, r)
		}
	}
	return nil
}

func checkNameCommon(what, name string) error {
	if len(name) == 0 || len(name) > MaxNameBytes {
		return fmt.Errorf("qwp: %s name %q is %d bytes; it must be 1..%d", what, name, len(name), MaxNameBytes)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("qwp: %s name %q is not valid UTF-8", what, name)
	}
	for _, r := range name {
		switch {
		case r <= 0x0f || r == 0x7f || r == 0xfeff:
			return fmt.Errorf("qwp: %s name %q contains control character %U", what, name, r)
		case r < utf8.RuneSelf && forbiddenNameChar[r]:
			return fmt.Errorf("qwp: %s name %q contains %q, which QuestDB forbids in names", what, name, r)
		}
	}
	return nil
}

var forbiddenNameChar = func() (f [utf8.RuneSelf]bool) {
	for _, c := range `?,'"\/:)(+*%~` {
		f[c] = true
	}
	return f
}()
