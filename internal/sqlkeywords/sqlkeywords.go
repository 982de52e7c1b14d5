// Package sqlkeywords holds the words QuestDB's SQL parser refuses as
// unquoted table or column names: the KEYWORDS set of griffin/SqlKeywords.java,
// checked by SqlParser's assertNameIsQuotedOrNotAKeyword ("table and column
// names that are SQL keywords have to be enclosed in double quotes"). The
// DDL generator quotes them and the test server refuses them bare, from this
// one list.
package sqlkeywords

import "strings"

var keywords = map[string]bool{}

func init() {
	for _, kw := range strings.Fields(`add align all alter and as asc attach batch between bypass
		cancel case cast column create desc detach disable distinct drop enable end except exists
		explain false from in insert intersect into join like limit lock nan not null on or order
		outer over partition rename resume sample select set squash table to true union update
		upsert values where with within`) {
		keywords[kw] = true
	}
}

// Is reports whether QuestDB refuses name, in any letter case, as an
// unquoted table or column name.
func Is(name string) bool { return keywords[strings.ToLower(name)] }
