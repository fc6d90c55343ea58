package agentstate

// RFC 6902 JSON Patch writes (PatchState and its forms) and reads of one place by RFC 6901
// JSON Pointer (GetPath, GetTail).

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// PatchOp is one operation of an RFC 6902 JSON Patch, for PatchState and PatchStateIf; build
// it with OpAdd, OpRemove, OpReplace, OpMove, OpCopy or OpTest. Path and From are JSON Pointers
// (RFC 6901: "/messages/0/text"; "" is the whole state; "~1" stands for "/" and "~0" for "~"
// in a member name, see JSONPointer; "/messages/-" is the place after an array's last element,
// where OpAdd appends).
//
// Marshal writes it as {"op":Op,"path":Path,"from":From,"value":Value}: "from" only for "move"
// and "copy" (or when From is not empty), "value" only for "add", "replace" and "test" (or
// when Value is not nil; a nil Value of those three is JSON null). Value is encoded by
// Marshal, so time.Time, *big.Int, Map, structs with their tags... are stored as SetState
// stores them. A PatchOp inside encoding/json is written the same way (MarshalJSON).
type PatchOp struct {
	// Op is "add", "remove", "replace", "move", "copy" or "test".
	Op string `json:"op"`
	// Path is where the operation applies: the place written, removed or tested, or where a
	// move or copy puts the value.
	Path string `json:"path"`
	// From is, for "move" and "copy", the place whose value is moved or copied.
	From string `json:"from"`
	// Value is, for "add", "replace" and "test", the value written or compared.
	Value any `json:"value"`
}

var patchOpType = reflect.TypeOf(PatchOp{})

// OpAdd is the operation that adds value at path: a member is set (added or replaced), an
// array element inserted before the one at that index, or appended for the index "-".
func OpAdd(path string, value any) PatchOp { return PatchOp{Op: "add", Path: path, Value: value} }

// OpRemove is the operation that removes the member or array element at path, which must
// exist (else ErrPath).
func OpRemove(path string) PatchOp { return PatchOp{Op: "remove", Path: path} }

// OpReplace is the operation that replaces the value at path, which must exist (else ErrPath).
func OpReplace(path string, value any) PatchOp {
	return PatchOp{Op: "replace", Path: path, Value: value}
}

// OpMove is the operation that removes the value at from and adds it at path (not inside
// itself: ErrPath).
func OpMove(from, path string) PatchOp { return PatchOp{Op: "move", From: from, Path: path} }

// OpCopy is the operation that adds a copy of the value at from at path.
func OpCopy(from, path string) PatchOp { return PatchOp{Op: "copy", From: from, Path: path} }

// OpTest is the operation that checks that the value at path equals value (as JSON values:
// numbers by value, members in any order), else the whole patch fails with ErrTestFailed and
// nothing is written: a compare-and-set on one place of the state.
func OpTest(path string, value any) PatchOp { return PatchOp{Op: "test", Path: path, Value: value} }

// MarshalJSON encodes o as Marshal does, so a PatchOp also works inside encoding/json.
func (o PatchOp) MarshalJSON() ([]byte, error) { return Marshal(o) }

func (e *encoder) patchOp(o PatchOp, depth int) error {
	if err := e.enter(1); err != nil {
		return err
	}
	defer e.leave(1)
	e.buf = append(e.buf, `{"op":`...)
	if err := e.str(o.Op); err != nil {
		return at(err, ".Op")
	}
	e.buf = append(e.buf, `,"path":`...)
	if err := e.str(o.Path); err != nil {
		return at(err, ".Path")
	}
	if o.From != "" || o.Op == "move" || o.Op == "copy" {
		e.buf = append(e.buf, `,"from":`...)
		if err := e.str(o.From); err != nil {
			return at(err, ".From")
		}
	}
	if o.Value != nil || o.Op == "add" || o.Op == "replace" || o.Op == "test" {
		e.buf = append(e.buf, `,"value":`...)
		if err := e.encode(reflect.ValueOf(o.Value), depth+1); err != nil {
			return at(err, ".Value")
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// JSONPointer returns the RFC 6901 JSON Pointer of the place named by tokens, each a member
// name or an array index, escaped ("~" as "~0", "/" as "~1"): JSONPointer("messages", "0",
// "a/b") is "/messages/0/a~1b". No tokens is "", the whole state.
func JSONPointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(t))
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// PatchState applies ops, an RFC 6902 JSON Patch, to the state, and returns the new state
// (decoded as by GetState). ops must encode (with Marshal) to a JSON array of operations: a
// []PatchOp (OpAdd, OpRemove, ...), a []map[string]any, a json.RawMessage... The operations
// apply in order, all or nothing, in one write transaction that starts from the latest
// committed state, so appending to a list never loses a concurrent writer's append:
//
//	st, err := a.PatchState([]agentstate.PatchOp{agentstate.OpAdd("/messages/-", msg)})
//
// A patch whose result is the stored state commits nothing (no version, no hook). Hooks and
// the validator see the change with Kind ChangeJSONPatch and the operations as its Patch; the
// change log keeps them.
//
// Errors (nothing written on any but ErrHook): ErrInvalidArgument (not an array, an unknown
// op, a missing member, a pointer with a bad escape such as "~2", a result that is not an
// object), ErrPath (a path or from that does not exist, an index out of range or with a
// leading zero, a move into its own child), ErrTestFailed (a "test" that does not hold),
// ErrCodec (a value with no JSON form, found before any call into the library; a duplicate
// member in an operation), ErrTooLarge (the patch or the result over MaxValueBytes), and those
// of SetState (ErrRejected, ErrHook, ErrBusy, ...). The message names the operation at fault
// ("operation 1 (remove "/q"): ..."; see Error.Operation).
//
// Safe for concurrent use, as every method of Agent.
func (a *Agent) PatchState(ops any) (map[string]any, error) {
	return a.patchValue(syncCall, "PatchState", ops)
}

// PatchStateJSON is PatchState with the operations given as JSON text, passed to the library
// untouched; it returns the new state as compact JSON.
func (a *Agent) PatchStateJSON(ops []byte) (json.RawMessage, error) {
	return a.patch(syncCall, "PatchStateJSON", ops)
}

// PatchStateContext is PatchState under ctx (see SetStateContext).
func (a *Agent) PatchStateContext(ctx context.Context, ops any) (map[string]any, error) {
	return a.patchValue(ctx, "PatchStateContext", ops)
}

// PatchStateJSONContext is PatchStateJSON under ctx (see SetStateContext).
func (a *Agent) PatchStateJSONContext(ctx context.Context, ops []byte) (json.RawMessage, error) {
	return a.patch(ctx, "PatchStateJSONContext", ops)
}

// PatchStateIf is a compare-and-set PatchState: it applies ops only if the agent's version is
// still expected (0: nothing stored yet) when the write transaction starts, and returns the
// new state and its version (expected itself when the patch changes nothing); otherwise an
// error matching ErrConflict, with nothing written. (An OpTest checks one place; this checks
// the whole state's version.) Other errors as for PatchState; when a hook fails (ErrHook) the
// change is committed but the state and version are not returned (nil, 0).
func (a *Agent) PatchStateIf(expected uint64, ops any) (map[string]any, uint64, error) {
	return a.patchValueIf(syncCall, "PatchStateIf", expected, ops)
}

// PatchStateIfJSON is PatchStateIf with the operations given as JSON text, passed untouched;
// it returns the new state as compact JSON.
func (a *Agent) PatchStateIfJSON(expected uint64, ops []byte) (json.RawMessage, uint64, error) {
	return a.patchIf(syncCall, "PatchStateIfJSON", expected, ops)
}

// PatchStateIfContext is PatchStateIf under ctx (see SetStateIfContext).
func (a *Agent) PatchStateIfContext(ctx context.Context, expected uint64, ops any) (map[string]any, uint64, error) {
	return a.patchValueIf(ctx, "PatchStateIfContext", expected, ops)
}

// PatchStateIfJSONContext is PatchStateIfJSON under ctx (see SetStateIfContext).
func (a *Agent) PatchStateIfJSONContext(ctx context.Context, expected uint64, ops []byte) (json.RawMessage, uint64, error) {
	return a.patchIf(ctx, "PatchStateIfJSONContext", expected, ops)
}

// marshalFor is Marshal with the failure's Op set to op.
func marshalFor(op string, v any) ([]byte, error) {
	data, err := Marshal(v)
	if err != nil {
		e := err.(*Error)
		e.Op = op
		return nil, e
	}
	return data, nil
}

func (a *Agent) patchValue(ctx context.Context, op string, ops any) (map[string]any, error) {
	data, err := marshalFor(op, ops)
	if err != nil {
		return nil, err
	}
	out, err := a.patch(ctx, op, data)
	if err != nil {
		return nil, err
	}
	return decodeState(op, out)
}

func (a *Agent) patchValueIf(ctx context.Context, op string, expected uint64, ops any) (map[string]any, uint64, error) {
	data, err := marshalFor(op, ops)
	if err != nil {
		return nil, 0, err
	}
	out, version, err := a.patchIf(ctx, op, expected, data)
	return decodeVersioned(op, out, version, err)
}

// GetPath decodes the value at pointer (an RFC 6901 JSON Pointer: "/messages/0/text"; "" is
// the whole state; see JSONPointer) into out (a non-nil pointer) with Unmarshal. Only that
// part of the state is encoded and copied, whatever the state's size. It reads as GetState
// does (the initial state while nothing is stored; it never writes).
//
// Errors: ErrPath (nothing there: a member that does not exist, an index out of range or with
// a leading zero, "-"), ErrInvalidArgument (not a JSON Pointer: no leading "/", a bad escape
// such as "~2", invalid UTF-8; out not a non-nil pointer), ErrCodec (the value does not decode
// into out), and those of GetState.
func (a *Agent) GetPath(pointer string, out any) error {
	return a.getPathInto(context.Background(), "GetPath", pointer, out)
}

// GetPathJSON is GetPath returning the value's compact JSON text, as stored.
func (a *Agent) GetPathJSON(pointer string) (json.RawMessage, error) {
	return a.getPath(context.Background(), "GetPathJSON", pointer)
}

// GetPathContext is GetPath under ctx (see GetStateContext).
func (a *Agent) GetPathContext(ctx context.Context, pointer string, out any) error {
	return a.getPathInto(ctx, "GetPathContext", pointer, out)
}

// GetPathJSONContext is GetPathJSON under ctx (see GetStateContext).
func (a *Agent) GetPathJSONContext(ctx context.Context, pointer string) (json.RawMessage, error) {
	return a.getPath(ctx, "GetPathJSONContext", pointer)
}

// GetTail decodes into out (a non-nil pointer, to a slice for instance) the last n elements of
// the array at pointer (as GetPath), oldest first: all of them when there are fewer, none for
// n 0. The last message of a conversation is GetTail("/messages", 1, &last).
//
// Errors: those of GetPath, and ErrInvalidArgument when the value there is not an array or n
// is negative.
func (a *Agent) GetTail(pointer string, n int, out any) error {
	return a.getTailInto(context.Background(), "GetTail", pointer, n, out)
}

// GetTailJSON is GetTail returning the elements as a compact JSON array.
func (a *Agent) GetTailJSON(pointer string, n int) (json.RawMessage, error) {
	return a.getTail(context.Background(), "GetTailJSON", pointer, n)
}

// GetTailContext is GetTail under ctx (see GetStateContext).
func (a *Agent) GetTailContext(ctx context.Context, pointer string, n int, out any) error {
	return a.getTailInto(ctx, "GetTailContext", pointer, n, out)
}

// GetTailJSONContext is GetTailJSON under ctx (see GetStateContext).
func (a *Agent) GetTailJSONContext(ctx context.Context, pointer string, n int) (json.RawMessage, error) {
	return a.getTail(ctx, "GetTailJSONContext", pointer, n)
}

// decodeInto checks out (a non-nil pointer) before read makes its call, then decodes what read
// returned into it.
func decodeInto(op string, out any, read func() ([]byte, error)) error {
	if rv := reflect.ValueOf(out); rv.Kind() != reflect.Pointer || rv.IsNil() {
		return newError(op, StatusInvalidArgument, fmt.Sprintf("the target must be a non-nil pointer, not %T", out), nil)
	}
	data, err := read()
	if err != nil {
		return err
	}
	if err := Unmarshal(data, out); err != nil {
		e := err.(*Error)
		e.Op = op
		return e
	}
	return nil
}

func (a *Agent) getPathInto(ctx context.Context, op, pointer string, out any) error {
	return decodeInto(op, out, func() ([]byte, error) { return a.getPath(ctx, op, pointer) })
}

func (a *Agent) getTailInto(ctx context.Context, op, pointer string, n int, out any) error {
	return decodeInto(op, out, func() ([]byte, error) { return a.getTail(ctx, op, pointer, n) })
}

func (a *Agent) getPath(ctx context.Context, op, pointer string) ([]byte, error) {
	text := []byte(pointer)
	p, n := (*C.char)(unsafe.Pointer(inputPtr(text))), C.size_t(len(text))
	out, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_get_path(c.h, p, n, out, c.ctx, c.token, c.err)
	})
	runtime.KeepAlive(text)
	return out, err
}

func (a *Agent) getTail(ctx context.Context, op, pointer string, count int) ([]byte, error) {
	if count < 0 {
		return nil, newError(op, StatusInvalidArgument, fmt.Sprintf("n is %d: the number of elements cannot be negative", count), nil)
	}
	text := []byte(pointer)
	p, n := (*C.char)(unsafe.Pointer(inputPtr(text))), C.size_t(len(text))
	out, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_get_tail(c.h, p, n, C.size_t(count), out, c.ctx, c.token, c.err)
	})
	runtime.KeepAlive(text)
	return out, err
}

// Operation returns the JSON Patch operation that e's message names ("operation 1 (remove
// "/q"): ..."): its index in the patch (from 0), its op and its path, as the library reports
// them for an ErrPath, ErrTestFailed, ErrInvalidArgument or ErrCodec error of PatchState and
// its forms. ok is false when the message names no operation (every other error; a patch that
// is not an array; GetPath and GetTail, whose pointer is the argument). op and path are empty
// when the operation has none (an unknown or missing op).
func (e *Error) Operation() (index int, op, path string, ok bool) {
	switch e.Status {
	case StatusPath, StatusTestFailed, StatusInvalidArgument, StatusCodec:
	default:
		// (a validator's or hook's text in the message is never read as the library's form)
		return 0, "", "", false
	}
	msg := e.Message
	for start := 0; ; {
		i := strings.Index(msg[start:], "operation ")
		if i < 0 {
			return 0, "", "", false
		}
		at := start + i
		start = at + len("operation ")
		if at > 0 && msg[at-1] != ' ' {
			continue // the end of another word
		}
		rest := msg[start:]
		digits := 0
		for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
			digits++
		}
		if digits == 0 {
			continue
		}
		index, err := strconv.Atoi(rest[:digits])
		if err != nil {
			continue
		}
		rest = rest[digits:]
		if strings.HasPrefix(rest, ":") {
			return index, "", "", true
		}
		if !strings.HasPrefix(rest, " (") {
			continue
		}
		rest = rest[2:]
		end := strings.IndexAny(rest, " )")
		if end < 0 {
			continue
		}
		op = rest[:end]
		if rest[end] == ')' {
			return index, op, "", true
		}
		path, ok := unquoteRust(rest[end+1:])
		if !ok {
			continue
		}
		return index, op, path, true
	}
}

// unquoteRust reads the string literal at the start of s as the library writes it (Rust's
// Debug form of a string: "\"", "\\", "\n", "\r", "\t", "\0", "\'" and "\u{hex}" escapes).
func unquoteRust(s string) (string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), true
		case c != '\\':
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += size
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		switch s[i+1] {
		case '"', '\\', '\'':
			b.WriteByte(s[i+1])
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '0':
			b.WriteByte(0)
		case 'u':
			end := strings.IndexByte(s[i:], '}')
			if !strings.HasPrefix(s[i+2:], "{") || end < 0 {
				return "", false
			}
			n, err := strconv.ParseUint(s[i+3:i+end], 16, 32)
			if err != nil {
				return "", false
			}
			b.WriteRune(rune(n))
			i += end + 1
			continue
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}
