package notify

import (
	"strings"
	"unicode"

	"github.com/rollboot/rollboot/internal/store"
)

// A message goes to chat services that read markup in it: Slack and
// Mattermost mrkdwn (<!channel>, <@U123>, <url|text>, *bold*, _italic_,
// ~strike~, `code`), Discord and Markdown (also ||spoilers|| and [text](url)
// links), and mentions (@here, @everyone, @channel, @all, @someone). The
// operator's template is markup on purpose; the values put in it are not: a
// host's reason or error, written by the host, is a claim that must not ping a
// channel, hide or disguise a link or restyle the message. So every text
// value of an event is made inert before a template sees it (Event.inert):
// cleaned as a host record's text is (one line, no control characters, at most
// store.MaxTextBytes), then each markup character replaced by a character that
// looks the same and means nothing to any of them, and each mention broken by
// an invisible space. One message reads the same on every service, plain
// e-mail and webhooks included.

// lookAlike is the character shown for each markup character.
var lookAlike = map[rune]rune{
	'<': '‹', // U+2039: Slack's <!channel>, <@U123>, <url|text>; Discord's <@id>; HTML
	'>': '›', // U+203A: the same, and Markdown quotes
	'*': '∗', // U+2217: bold, italic, lists
	'_': 'ˍ', // U+02CD: italic, bold (but inside a word, where it styles nothing)
	'~': '∼', // U+223C: strike-through
	'`': 'ˋ', // U+02CB: code
	'|': 'ǀ', // U+01C0: Discord's spoilers
}

// zeroWidthSpace breaks a mention (@everyone) or a Markdown link ([a](b))
// without showing.
const zeroWidthSpace = '\u200b'

// inert returns a copy of e whose text values (Host, Group, Grant, Reason,
// Error, PauseReason) are inert in chat markup; Kind is the event's own.
func (e Event) inert() Event {
	for _, s := range []*string{&e.Host, &e.Group, &e.Grant, &e.Reason, &e.Error, &e.PauseReason, &e.Freeze} {
		*s = inertText(*s)
	}
	return e
}

// inertText returns s cleaned (store.CleanText) with its markup made inert.
func inertText(s string) string {
	s = store.CleanText(s)
	if !strings.ContainsAny(s, "<>*_~`|@](") {
		return s
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range rs {
		switch {
		case r == '_' && i > 0 && i+1 < len(rs) && isWord(rs[i-1]) && isWord(rs[i+1]):
			b.WriteRune(r) // reboot_required: no markup
		case lookAlike[r] != 0:
			b.WriteRune(lookAlike[r])
		case r == '@' && i+1 < len(rs) && !unicode.IsSpace(rs[i+1]), // @everyone, @user.name
			r == ']' && i+1 < len(rs) && rs[i+1] == '(': // [text](url)
			b.WriteRune(r)
			b.WriteRune(zeroWidthSpace)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
