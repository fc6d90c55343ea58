package agentstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
)

// Typed is an Agent whose state is read and written as a Go type T, a struct (or map) type
// that encodes to a JSON object: the State API's Agent<Env, State> in Go. It changes types
// only: what is stored, the versions, the hooks and the other bindings' view are exactly those
// of the Agent underneath (Agent returns it, for everything Typed does not wrap).
//
//	type ConvState struct {
//		Status    string    `json:"status"`
//		LastReply string    `json:"lastReply"`
//		At        time.Time `json:"at"`
//	}
//	conv, err := agentstate.OpenTyped[ConvState]("conv.db", agentstate.Options{
//		InitialState: ConvState{Status: "idle"}})
//	st, err := conv.Set(agentstate.Patch{}.Set("status", "processing")) // st is a ConvState
//	st, err = conv.Update(func(s *ConvState) error { s.At = time.Now(); return nil })
//
// Reads decode into a new T each time (Unmarshal, so members T does not know are ignored, and
// members missing from the state leave T's zero value). Set takes a merge patch as
// SetState does — a Patch, a map, a patch struct — and a T given to Set is a struct patch, with
// its rule: every field it does not omit is written, zero values included (see SetState).
// Update and Replace are the ways to write a whole T.
type Typed[T any] struct {
	agent *Agent
}

// NewTyped returns a's state typed as T. The Typed and a are one Agent: closing either closes
// both.
func NewTyped[T any](a *Agent) *Typed[T] { return &Typed[T]{agent: a} }

// OpenTyped opens the store at path as Open does, its state typed as T. opts.InitialState may
// be a T.
func OpenTyped[T any](path string, opts Options) (*Typed[T], error) {
	a, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	return NewTyped[T](a), nil
}

// Agent returns the Agent underneath: its methods see and change the same state.
func (t *Typed[T]) Agent() *Agent { return t.agent }

// Close closes the Agent underneath (see Agent.Close).
func (t *Typed[T]) Close() error { return t.agent.Close() }

// typedState decodes a state's JSON into a new T; an error names op.
func typedState[T any](op string, data []byte) (T, error) {
	var v T
	if err := Unmarshal(data, &v); err != nil {
		e := err.(*Error)
		e.Op = op
		return v, e
	}
	return v, nil
}

// Get returns the state as a T: the stored state, or the initial state while nothing is
// stored. A state that does not fit T is an ErrCodec error.
func (t *Typed[T]) Get() (T, error) { return t.GetContext(syncCall) }

// GetContext is Get under ctx (see Agent.GetStateContext).
func (t *Typed[T]) GetContext(ctx context.Context) (T, error) {
	data, err := t.agent.getState(ctx, "Typed.Get")
	if err != nil {
		var zero T
		return zero, err
	}
	return typedState[T]("Typed.Get", data)
}

// GetVersioned returns the state as a T and its version, read together (see
// Agent.GetStateVersioned).
func (t *Typed[T]) GetVersioned() (T, uint64, error) {
	return t.GetVersionedContext(syncCall)
}

// GetVersionedContext is GetVersioned under ctx.
func (t *Typed[T]) GetVersionedContext(ctx context.Context) (T, uint64, error) {
	data, version, err := t.agent.getStateVersioned(ctx, "Typed.GetVersioned")
	if err != nil {
		var zero T
		return zero, 0, err
	}
	v, err := typedState[T]("Typed.GetVersioned", data)
	return v, version, err
}

// Set merges patch into the state as Agent.SetState does (RFC 7396) and returns the merged
// state as a T. patch is what SetState takes: a Patch (only the members it names), a map, a
// patch struct, json.RawMessage. A T is a struct patch too: every field it does not omit is
// written, zero values included; to write a whole T use Replace, to change some fields of the
// stored T use Update.
func (t *Typed[T]) Set(patch any) (T, error) { return t.SetContext(syncCall, patch) }

// SetContext is Set under ctx.
func (t *Typed[T]) SetContext(ctx context.Context, patch any) (T, error) {
	return t.write(ctx, "Typed.Set", patch, false)
}

// Replace replaces the state with next (see Agent.ReplaceState) and returns it as stored, a T.
func (t *Typed[T]) Replace(next T) (T, error) { return t.ReplaceContext(syncCall, next) }

// ReplaceContext is Replace under ctx.
func (t *Typed[T]) ReplaceContext(ctx context.Context, next T) (T, error) {
	return t.write(ctx, "Typed.Replace", next, true)
}

func (t *Typed[T]) write(ctx context.Context, op string, v any, replace bool) (T, error) {
	var zero T
	data, err := Marshal(v)
	if err != nil {
		e := err.(*Error)
		e.Op = op
		return zero, e
	}
	out, err := t.agent.write(ctx, op, data, replace)
	if err != nil {
		return zero, err
	}
	return typedState[T](op, out)
}

// SetIf is Set only if the state is still at version expected (see Agent.SetStateIf): it
// returns the merged state and its version, or an error matching ErrConflict with nothing
// written.
func (t *Typed[T]) SetIf(expected uint64, patch any) (T, uint64, error) {
	return t.SetIfContext(syncCall, expected, patch)
}

// SetIfContext is SetIf under ctx.
func (t *Typed[T]) SetIfContext(ctx context.Context, expected uint64, patch any) (T, uint64, error) {
	return t.writeIf(ctx, "Typed.SetIf", expected, patch, false)
}

// ReplaceIf is Replace only if the state is still at version expected (see
// Agent.ReplaceStateIf).
func (t *Typed[T]) ReplaceIf(expected uint64, next T) (T, uint64, error) {
	return t.ReplaceIfContext(syncCall, expected, next)
}

// ReplaceIfContext is ReplaceIf under ctx.
func (t *Typed[T]) ReplaceIfContext(ctx context.Context, expected uint64, next T) (T, uint64, error) {
	return t.writeIf(ctx, "Typed.ReplaceIf", expected, next, true)
}

func (t *Typed[T]) writeIf(ctx context.Context, op string, expected uint64, v any, replace bool) (T, uint64, error) {
	var zero T
	data, err := Marshal(v)
	if err != nil {
		e := err.(*Error)
		e.Op = op
		return zero, 0, e
	}
	out, version, err := t.agent.writeIf(ctx, op, expected, data, replace)
	if err != nil {
		return zero, 0, err
	}
	st, err := typedState[T](op, out)
	return st, version, err
}

// Patch applies ops, an RFC 6902 JSON Patch (a []PatchOp; see Agent.PatchState), and returns
// the new state as a T: the way to append to a list field without writing the whole list.
// Errors as for Agent.PatchState (ErrPath, ErrTestFailed, ...), nothing written on any but
// ErrHook.
func (t *Typed[T]) Patch(ops any) (T, error) { return t.PatchContext(syncCall, ops) }

// PatchContext is Patch under ctx.
func (t *Typed[T]) PatchContext(ctx context.Context, ops any) (T, error) {
	const op = "Typed.Patch"
	var zero T
	data, err := marshalFor(op, ops)
	if err != nil {
		return zero, err
	}
	out, err := t.agent.patch(ctx, op, data)
	if err != nil {
		return zero, err
	}
	return typedState[T](op, out)
}

// PatchIf is Patch only if the state is still at version expected (see Agent.PatchStateIf):
// it returns the new state and its version, or an error matching ErrConflict with nothing
// written.
func (t *Typed[T]) PatchIf(expected uint64, ops any) (T, uint64, error) {
	return t.PatchIfContext(syncCall, expected, ops)
}

// PatchIfContext is PatchIf under ctx.
func (t *Typed[T]) PatchIfContext(ctx context.Context, expected uint64, ops any) (T, uint64, error) {
	const op = "Typed.PatchIf"
	var zero T
	data, err := marshalFor(op, ops)
	if err != nil {
		return zero, 0, err
	}
	out, version, err := t.agent.patchIf(ctx, op, expected, data)
	if err != nil {
		return zero, 0, err
	}
	st, err := typedState[T](op, out)
	return st, version, err
}

// Update changes the stored T with fn and writes what fn changed, and nothing else, as one
// compare-and-set merge patch: it reads the state and its version, calls fn with it, and
// writes the members whose encoding fn changed (those fn left out, by omitempty or omitzero or
// a nil map entry, are deleted; members of the stored state that T does not know are left
// alone), only if nobody wrote in between. If somebody did, it reads again and calls fn again,
// so fn must only compute (it may run more than once). If fn returns an error, nothing is
// written and Update returns it as it is. When fn changes nothing, nothing is written. It
// returns the state after the write, as a T.
//
// A nil value in a map, or a nil pointer without an omit option, is null in the patch, which
// deletes the member: T reads it back as the zero value either way.
func (t *Typed[T]) Update(fn func(*T) error) (T, error) {
	return t.UpdateContext(syncCall, fn)
}

// UpdateContext is Update under ctx: ctx bounds every read and write it makes.
func (t *Typed[T]) UpdateContext(ctx context.Context, fn func(*T) error) (T, error) {
	const op = "Typed.Update"
	var zero T
	if fn == nil {
		return zero, newError(op, StatusInvalidArgument, "the update function is nil", nil)
	}
	for {
		data, version, err := t.agent.getStateVersioned(ctx, op)
		if err != nil {
			return zero, err
		}
		cur, err := typedState[T](op, data)
		if err != nil {
			return zero, err
		}
		// The diff is between T's own encodings before and after fn, so that members of the
		// stored state that T does not hold, or holds in another spelling (1.0 for an int),
		// are not part of it.
		before, err := Marshal(cur)
		if err != nil {
			return zero, withOp(err, op)
		}
		if err := fn(&cur); err != nil {
			return zero, err
		}
		after, err := Marshal(cur)
		if err != nil {
			return zero, withOp(err, op)
		}
		patch, err := mergeDiff(before, after)
		if err != nil {
			return zero, newError(op, StatusCodec, err.Error(), nil)
		}
		if patch == nil {
			return typedState[T](op, data)
		}
		out, _, err := t.agent.writeIf(ctx, op, version, patch, false)
		if errors.Is(err, ErrConflict) {
			continue // another writer came first: read its state and apply fn to it
		}
		if err != nil {
			return zero, err
		}
		return typedState[T](op, out)
	}
}

// withOp sets the Op of an *Error from Marshal or Unmarshal.
func withOp(err error, op string) error {
	if e, ok := err.(*Error); ok {
		e.Op = op
	}
	return err
}

// OnStateChanged registers fn to run after every change delivered to the Agent's hooks, with
// the states after and before it as T values (see Agent.OnStateChanged for when and where it
// runs). A state that does not decode as a T makes the delivery fail as a hook error would:
// the call that made the change returns an ErrHook error wrapping the ErrCodec one.
func (t *Typed[T]) OnStateChanged(fn func(next, prev T) error) (HookID, error) {
	if fn == nil {
		return 0, newError("Typed.OnStateChanged", StatusInvalidArgument, "the hook function is nil", nil)
	}
	return t.agent.register("Typed.OnStateChanged", &stateHook{fn: func(next, prev, _ json.RawMessage) error {
		n, err := typedState[T]("Typed.OnStateChanged", next)
		if err != nil {
			return hookDecodeError{"next", err.(*Error)}
		}
		p, err := typedState[T]("Typed.OnStateChanged", prev)
		if err != nil {
			return hookDecodeError{"prev", err.(*Error)}
		}
		return fn(n, p)
	}})
}

// hookDecodeError is a typed hook's failure to decode a state: the cause of the ErrHook error
// of the call that made the change, which names the call already ("agentstate: SetState: ..."),
// so its text leaves out its own "agentstate: Typed.OnStateChanged: ".
type hookDecodeError struct {
	which string // "next" or "prev"
	err   *Error
}

func (e hookDecodeError) Error() string {
	return "typed hook: cannot decode " + e.which + ": " + e.err.Message
}

func (e hookDecodeError) Unwrap() error { return e.err }

// RemoveHook unregisters a hook (see Agent.RemoveHook).
func (t *Typed[T]) RemoveHook(id HookID) error { return t.agent.RemoveHook(id) }

// mergeDiff is the merge patch (RFC 7396) that turns the JSON object before into after, or nil
// when they are the same: the members after changed or added, null for those it dropped;
// objects that are in both are diffed member by member, anything else (arrays, scalars,
// tagged values, which the library takes only whole) is written whole. A null in after where
// before had none is left out, since a patch can only write it as a deletion.
func mergeDiff(before, after []byte) ([]byte, error) {
	b, err := parseJSON(before)
	if err != nil {
		return nil, err
	}
	a, err := parseJSON(after)
	if err != nil {
		return nil, err
	}
	if b.kind != '{' || a.kind != '{' {
		return nil, errors.New("the state does not encode to a JSON object")
	}
	var out bytes.Buffer
	if !objectDiff(&out, b, a) {
		return nil, nil
	}
	return out.Bytes(), nil
}

// objectDiff writes the patch from object b to object a and reports whether it has members.
func objectDiff(out *bytes.Buffer, b, a *node) bool {
	start := out.Len()
	out.WriteByte('{')
	n := 0
	write := func(name string, value []byte) {
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		key := encoder{}
		_ = key.str(name) // a name parsed from valid JSON is valid UTF-8
		out.Write(key.buf)
		out.WriteByte(':')
		out.Write(value)
	}
	for i, name := range a.keys {
		av, bv := a.vals[i], member(b, name)
		switch {
		case bv == nil && av.kind == 'z':
			// Absent before, null now: the same for T, and a patch cannot write null.
		case bv == nil:
			write(name, av.raw)
		case bytes.Equal(bv.raw, av.raw):
		case bv.kind == '{' && av.kind == '{' && tagOf(bv) == "" && tagOf(av) == "":
			var sub bytes.Buffer
			if objectDiff(&sub, bv, av) {
				write(name, sub.Bytes())
			}
		default:
			write(name, av.raw)
		}
	}
	for i, name := range b.keys {
		if member(a, name) == nil && b.vals[i].kind != 'z' {
			write(name, []byte("null"))
		}
	}
	if n == 0 {
		out.Truncate(start)
		return false
	}
	out.WriteByte('}')
	return true
}
