package qwptest

import "strings"

// sqlKeywords are the words QuestDB's parser refuses as unquoted table or
// column names (griffin/SqlKeywords.java, the KEYWORDS set behind
// assertNameIsQuotedOrNotAKeyword). Quoted, any of them is a valid name.
var sqlKeywords = map[string]bool{}

func init() {
	for _, kw := range strings.Fields(`add align all alter and as asc attach batch between bypass
		cancel case cast column create desc detach disable distinct drop enable end except exists
		explain false from in insert intersect into join like limit lock nan not null on or order
		outer over partition rename resume sample select set squash table to true union update
		upsert values where with within`) {
		sqlKeywords[kw] = true
	}
}

// isSQLKeyword reports whether QuestDB refuses name as an unquoted table or
// column name (case-insensitive). The list is kept apart from the exporter's
// own on purpose: the stand-in checks the client, it does not share its
// mistakes.
func isSQLKeyword(name string) bool { return sqlKeywords[strings.ToLower(name)] }
