package store

import "strings"

// likeEscaper escapes what LIKE patterns treat specially, with \ as the
// escape character (both stores' queries say ESCAPE '\').
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// LikeEscape returns s as a LIKE pattern that matches s itself.
func LikeEscape(s string) string {
	return likeEscaper.Replace(s)
}
