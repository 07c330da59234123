package dashboard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Bounds on what decodeServeDetails keeps of an answer, whatever its size: a head answers what its image
// makes it answer, and Serve's details feed the RayService's status, which the API server keeps whole.
const (
	// maxServeEntries bounds the applications, deployments and proxies kept, together.
	maxServeEntries = 10000
	// maxServeName bounds an application's or deployment's name; a longer one is an error.
	maxServeName = 1024
	// maxServeMessage bounds a status message; a longer one is cut and ends with truncatedSuffix.
	maxServeMessage = 4096
	// maxServeStatus bounds a status; Serve's are single words.
	maxServeStatus = 64
	// maxServeKept bounds the names, statuses and messages kept, together.
	maxServeKept = 4 << 20
	// maxJSONDepth bounds the nesting of the values skipped.
	maxJSONDepth = 64
	// maxNumber bounds the numbers kept (target_capacity).
	maxNumber = 64
)

// truncatedSuffix ends a message cut at maxServeMessage.
const truncatedSuffix = "...(truncated)"

// decodeServeDetails reads Serve's declarative details from r as they arrive, keeping only what ServeDetails
// holds within the bounds above: every other value is skipped byte by byte, so a huge or deeply nested
// answer costs no more memory than a small one. The JSON read is checked as strictly as encoding/json does,
// and what is kept equals what encoding/json would decode.
func decodeServeDetails(r io.Reader) (*ServeDetails, error) {
	d := &serveDecoder{r: bufio.NewReaderSize(r, 32<<10)}
	details := &ServeDetails{}
	err := d.nullOr('{', nil, func() error {
		return d.object(0, func(key string) error {
			switch {
			case strings.EqualFold(key, "applications"):
				return d.nullOr('{', func() { details.Applications = nil }, func() error {
					if details.Applications == nil {
						details.Applications = map[string]ServeApplication{}
					}
					return d.object(0, func(name string) error {
						app, err := d.application()
						if err == nil {
							err = d.count(name)
							details.Applications[name] = app
						}
						return err
					})
				})
			case strings.EqualFold(key, "proxies"):
				return d.nullOr('{', func() { details.Proxies = nil }, func() error {
					if details.Proxies == nil {
						details.Proxies = map[string]ServeProxy{}
					}
					return d.object(0, func(node string) error {
						p, err := d.proxy()
						if err == nil {
							err = d.count(node)
							details.Proxies[node] = p
						}
						return err
					})
				})
			case strings.EqualFold(key, "target_capacity"):
				return d.nullOr('0', func() { details.TargetCapacity = nil }, func() error {
					f, err := d.number()
					details.TargetCapacity = &f
					return err
				})
			}
			return d.skip(0)
		})
	})
	if err != nil {
		return nil, err
	}
	if b, err := d.nonSpace(); err != io.EOF {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("invalid character %q after the top-level value", b)
	}
	return details, nil
}

// serveDecoder is a JSON reader that keeps strings only where asked to and counts what it keeps.
type serveDecoder struct {
	r       *bufio.Reader
	entries int
	kept    int
}

// application reads one application's details.
func (d *serveDecoder) application() (ServeApplication, error) {
	var app ServeApplication
	err := d.nullOr('{', nil, func() error {
		return d.object(0, func(key string) error {
			var err error
			switch {
			case strings.EqualFold(key, "status"):
				err = d.keptField(&app.Status, maxServeStatus)
			case strings.EqualFold(key, "message"):
				err = d.keptField(&app.Message, maxServeMessage)
			case strings.EqualFold(key, "deployments"):
				err = d.nullOr('{', func() { app.Deployments = nil }, func() error {
					if app.Deployments == nil {
						app.Deployments = map[string]ServeDeployment{}
					}
					return d.object(0, func(name string) error {
						dep, err := d.deployment()
						if err == nil {
							err = d.count(name)
							app.Deployments[name] = dep
						}
						return err
					})
				})
			default:
				err = d.skip(0)
			}
			return err
		})
	})
	return app, err
}

// deployment reads one deployment's details.
func (d *serveDecoder) deployment() (ServeDeployment, error) {
	var dep ServeDeployment
	err := d.nullOr('{', nil, func() error {
		return d.object(0, func(key string) error {
			var err error
			switch {
			case strings.EqualFold(key, "status"):
				err = d.keptField(&dep.Status, maxServeStatus)
			case strings.EqualFold(key, "message"):
				err = d.keptField(&dep.Message, maxServeMessage)
			default:
				err = d.skip(0)
			}
			return err
		})
	})
	return dep, err
}

// proxy reads one proxy's details.
func (d *serveDecoder) proxy() (ServeProxy, error) {
	var p ServeProxy
	err := d.nullOr('{', nil, func() error {
		return d.object(0, func(key string) error {
			switch {
			case strings.EqualFold(key, "node_id"):
				return d.keptField(&p.NodeID, maxServeName)
			case strings.EqualFold(key, "node_ip"):
				return d.keptField(&p.NodeIP, maxServeName)
			case strings.EqualFold(key, "node_instance_id"):
				return d.keptField(&p.NodeInstanceID, maxServeName)
			case strings.EqualFold(key, "status"):
				return d.keptField(&p.Status, maxServeStatus)
			}
			return d.skip(0)
		})
	})
	return p, err
}

// count records one more kept entry, named name.
func (d *serveDecoder) count(name string) error {
	if err := d.keep(len(name)); err != nil {
		return err
	}
	d.entries++
	if d.entries > maxServeEntries {
		return fmt.Errorf("Serve's details list more than %d applications, deployments and proxies, the most kray keeps", maxServeEntries)
	}
	return nil
}

// keep records n more kept bytes.
func (d *serveDecoder) keep(n int) error {
	d.kept += n
	if d.kept > maxServeKept {
		return fmt.Errorf("Serve's details hold more than %d bytes of names, statuses and messages, the most kray keeps", maxServeKept)
	}
	return nil
}

// nullOr reads null, calling onNull (when not nil), or calls read for a value starting with want ('0' stands
// for a number). encoding/json, too, sets a map or pointer to nil on null and leaves a struct as it is.
func (d *serveDecoder) nullOr(want byte, onNull func(), read func() error) error {
	b, err := d.peek()
	if err != nil {
		return err
	}
	switch {
	case b == 'n':
		if onNull != nil {
			onNull()
		}
		return d.literal("null")
	case b == want, want == '0' && (b == '-' || b >= '0' && b <= '9'):
		return read()
	}
	return fmt.Errorf("invalid character %q where %s was expected", b, map[byte]string{'{': "an object", '0': "a number"}[want])
}

// object reads an object, calling member with each key once the reader stands at its value; member reads
// the value. Without member, the object is skipped at depth.
func (d *serveDecoder) object(depth int, member func(key string) error) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	b, err := d.peek()
	if err != nil {
		return err
	}
	if b == '}' {
		_, _ = d.r.ReadByte()
		return nil
	}
	for {
		var buf *strings.Builder
		if member != nil {
			buf = &strings.Builder{}
		}
		if err := d.str(buf, maxServeName); err != nil {
			return err
		}
		if buf != nil && buf.Len() > maxServeName {
			return fmt.Errorf("Serve's details hold a name longer than %d bytes, the most kray keeps", maxServeName)
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		if member == nil {
			err = d.skip(depth + 1)
		} else {
			err = member(buf.String())
		}
		if err != nil {
			return err
		}
		b, err := d.nonSpace()
		if err != nil {
			return unexpectedEOF(err)
		}
		switch b {
		case ',':
			continue
		case '}':
			return nil
		}
		return fmt.Errorf("invalid character %q after an object's value", b)
	}
}

// skip reads one value of any kind and keeps nothing of it.
func (d *serveDecoder) skip(depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("values nested deeper than %d", maxJSONDepth)
	}
	b, err := d.peek()
	if err != nil {
		return err
	}
	switch {
	case b == '{':
		return d.object(depth, nil)
	case b == '[':
		_, _ = d.r.ReadByte()
		if b, err := d.peek(); err != nil {
			return err
		} else if b == ']' {
			_, _ = d.r.ReadByte()
			return nil
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			b, err := d.nonSpace()
			if err != nil {
				return unexpectedEOF(err)
			}
			switch b {
			case ',':
				continue
			case ']':
				return nil
			}
			return fmt.Errorf("invalid character %q after an array's element", b)
		}
	case b == '"':
		return d.skipString()
	case b == 't':
		return d.literal("true")
	case b == 'f':
		return d.literal("false")
	case b == 'n':
		return d.literal("null")
	case b == '-' || b >= '0' && b <= '9':
		return d.skipNumber()
	}
	return fmt.Errorf("invalid character %q looking for the beginning of a value", b)
}

// number reads a number of at most maxNumber bytes.
func (d *serveDecoder) number() (float64, error) {
	var text []byte
	for {
		b, err := d.r.ReadByte()
		if err != nil && err != io.EOF {
			return 0, err
		}
		if err == io.EOF || !isNumberByte(b) {
			if err == nil {
				_ = d.r.UnreadByte()
			}
			break
		}
		if text = append(text, b); len(text) > maxNumber {
			return 0, fmt.Errorf("a number longer than %d bytes", maxNumber)
		}
	}
	if !validNumber(text) {
		return 0, fmt.Errorf("invalid number %q", text)
	}
	return strconv.ParseFloat(string(text), 64)
}

// skipNumber reads a number of any length, checking its grammar without keeping it.
func (d *serveDecoder) skipNumber() error {
	// The grammar's states: after a sign, in the integer's digits, after the dot, in the fraction, after
	// the exponent's e, after its sign, in its digits. A leading zero is its own state.
	const (
		sign = iota
		zero
		integer
		dot
		fraction
		exp
		expSign
		expDigits
	)
	state := sign
	first, _ := d.r.ReadByte()
	switch {
	case first == '0':
		state = zero
	case first >= '1' && first <= '9':
		state = integer
	}
	for {
		b, err := d.r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		digit := b >= '0' && b <= '9'
		next := -1
		switch {
		case state == sign && b == '0':
			next = zero
		case state == sign && digit, state == integer && digit:
			next = integer
		case (state == zero || state == integer) && b == '.':
			next = dot
		case (state == dot || state == fraction) && digit:
			next = fraction
		case (state == zero || state == integer || state == fraction) && (b == 'e' || b == 'E'):
			next = exp
		case state == exp && (b == '+' || b == '-'):
			next = expSign
		case (state == exp || state == expSign || state == expDigits) && digit:
			next = expDigits
		}
		if next < 0 {
			_ = d.r.UnreadByte()
			break
		}
		state = next
	}
	if state != zero && state != integer && state != fraction && state != expDigits {
		return errors.New("invalid number")
	}
	return nil
}

// isNumberByte reports whether b may appear in a JSON number.
func isNumberByte(b byte) bool {
	return b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E'
}

// validNumber reports whether text is a JSON number.
func validNumber(text []byte) bool {
	d := &serveDecoder{r: bufio.NewReader(strings.NewReader(string(text)))}
	if d.skipNumber() != nil {
		return false
	}
	_, err := d.r.ReadByte()
	return err == io.EOF
}

// literal reads the literal word.
func (d *serveDecoder) literal(word string) error {
	for i := range len(word) {
		b, err := d.r.ReadByte()
		if err != nil {
			return unexpectedEOF(err)
		}
		if b != word[i] {
			return fmt.Errorf("invalid character %q in literal %s", b, word)
		}
	}
	return nil
}

// skipString reads a string without keeping it.
func (d *serveDecoder) skipString() error {
	return d.str(nil, 0)
}

// keptField reads a string into *field, or null, which leaves it as it is (as encoding/json does).
func (d *serveDecoder) keptField(field *string, limit int) error {
	b, err := d.peek()
	if err != nil {
		return err
	}
	if b == 'n' {
		return d.literal("null")
	}
	*field, err = d.keptString(limit)
	return err
}

// keptString reads a string and returns it, cut at limit bytes (with truncatedSuffix, within limit), and
// counts it against maxServeKept.
func (d *serveDecoder) keptString(limit int) (string, error) {
	var buf strings.Builder
	if err := d.str(&buf, limit); err != nil {
		return "", err
	}
	s := buf.String()
	if len(s) > limit {
		cut := limit - len(truncatedSuffix)
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + truncatedSuffix
	}
	return s, d.keep(len(s))
}

// str reads a string, writing its decoded text to out (when not nil) up to limit+1 bytes.
func (d *serveDecoder) str(out *strings.Builder, limit int) error {
	if err := d.expect('"'); err != nil {
		return err
	}
	write := func(s string) {
		if out != nil && out.Len() <= limit {
			out.WriteString(s)
		}
	}
	var pending []byte // the bytes of a UTF-8 sequence not yet complete
	flush := func() {
		// Each byte of an invalid sequence becomes U+FFFD, as encoding/json decodes it.
		for len(pending) > 0 {
			r, size := utf8.DecodeRune(pending)
			write(string(r))
			pending = pending[size:]
		}
		pending = pending[:0]
	}
	for {
		b, err := d.r.ReadByte()
		if err != nil {
			return unexpectedEOF(err)
		}
		switch {
		case b == '"':
			flush()
			return nil
		case b < 0x20:
			return fmt.Errorf("invalid character %q in a string", b)
		case b == '\\':
			flush()
			r, err := d.escape()
			if err != nil {
				return err
			}
			write(string(r))
		case b < utf8.RuneSelf:
			flush()
			write(string(rune(b)))
		default:
			if utf8.RuneStart(b) {
				flush()
			}
			pending = append(pending, b)
			if utf8.FullRune(pending) || len(pending) == utf8.UTFMax {
				flush()
			}
		}
	}
}

// escape reads an escape sequence after its backslash; \u escapes of a UTF-16 surrogate pair make one rune,
// and a lone surrogate is U+FFFD, as encoding/json decodes them.
func (d *serveDecoder) escape() (rune, error) {
	b, err := d.r.ReadByte()
	if err != nil {
		return 0, unexpectedEOF(err)
	}
	switch b {
	case '"', '\\', '/':
		return rune(b), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := d.hex4()
		if err != nil || !utf16.IsSurrogate(r) {
			return r, err
		}
		// A high surrogate takes the next \u escape if it is its low half.
		if next, _ := d.r.Peek(6); len(next) == 6 && next[0] == '\\' && next[1] == 'u' {
			if low, err := strconv.ParseUint(string(next[2:]), 16, 32); err == nil {
				if pair := utf16.DecodeRune(r, rune(low)); pair != utf8.RuneError {
					_, _ = d.r.Discard(6)
					return pair, nil
				}
			}
		}
		return utf8.RuneError, nil
	}
	return 0, fmt.Errorf("invalid escape \\%c in a string", b)
}

// hex4 reads the four hex digits of a \u escape.
func (d *serveDecoder) hex4() (rune, error) {
	var r rune
	for range 4 {
		b, err := d.r.ReadByte()
		if err != nil {
			return 0, unexpectedEOF(err)
		}
		v, err := strconv.ParseUint(string(b), 16, 8)
		if err != nil {
			return 0, fmt.Errorf("invalid character %q in a \\u escape", b)
		}
		r = r<<4 | rune(v)
	}
	return r, nil
}

// expect reads the next byte after white space, which must be want.
func (d *serveDecoder) expect(want byte) error {
	b, err := d.nonSpace()
	if err != nil {
		return unexpectedEOF(err)
	}
	if b != want {
		return fmt.Errorf("invalid character %q where %q was expected", b, want)
	}
	return nil
}

// peek returns the next byte after white space without reading it.
func (d *serveDecoder) peek() (byte, error) {
	b, err := d.nonSpace()
	if err != nil {
		return 0, unexpectedEOF(err)
	}
	return b, d.r.UnreadByte()
}

// nonSpace reads the next byte that is not JSON white space.
func (d *serveDecoder) nonSpace() (byte, error) {
	for {
		b, err := d.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			return b, nil
		}
	}
}

// unexpectedEOF turns the end of the answer inside a value into io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
