package agentstate

import (
	"reflect"
	"strconv"
)

// Patch is a merge patch (RFC 7396) built from the members it names, for SetState, SetStateIf,
// Typed.Set and their forms: Set writes a member, Delete removes one, and nothing else of the
// stored state is touched.
//
//	patch := agentstate.Patch{}.Set("status", "processing").Delete("lastReply")
//	st, err := a.SetState(patch) // {"status":"processing","lastReply":null}
//
// It is the way to change a few members of a state kept in a struct type without a struct
// patch's zero values (see SetState): a struct patch sends every field it does not omit.
//
// Members are written in the order first named; naming one again replaces its value in place.
// A value is encoded as by Marshal when the patch is. A nil value (a nil pointer, map, slice or
// interface too) is JSON null, which deletes the member, as Delete does. An object value merges
// into the stored member recursively (that is RFC 7396: members it does not name survive);
// a Patch as a value is a nested patch, so Set("job", Patch{}.Set("step", 3).Delete("note"))
// changes job.step and deletes job.note, leaving the rest of job alone. Arrays and every other
// value replace the member whole.
//
// Set and Delete return a new Patch and leave p unchanged, so a Patch may be shared and
// extended from several places; each call copies the members, so it is meant for patches of
// a few members, not thousands. The zero Patch is the empty patch {}, which changes nothing.
type Patch struct {
	members []patchMember
}

type patchMember struct {
	name   string
	value  any
	delete bool
}

var patchType = reflect.TypeOf(Patch{})

// Set returns p with the member name set to value (null, deleting it, for a nil value).
func (p Patch) Set(name string, value any) Patch {
	return p.with(patchMember{name: name, value: value})
}

// Delete returns p with the member name deleted (JSON null in the patch).
func (p Patch) Delete(name string) Patch {
	return p.with(patchMember{name: name, delete: true})
}

// Len is the number of members p names.
func (p Patch) Len() int { return len(p.members) }

func (p Patch) with(m patchMember) Patch {
	out := make([]patchMember, 0, len(p.members)+1)
	replaced := false
	for _, x := range p.members {
		if x.name == m.name {
			x, replaced = m, true
		}
		out = append(out, x)
	}
	if !replaced {
		out = append(out, m)
	}
	return Patch{members: out}
}

// MarshalJSON encodes p as Marshal does, so Patch also works inside encoding/json.
func (p Patch) MarshalJSON() ([]byte, error) { return Marshal(p) }

func (e *encoder) patch(p Patch, depth int) error {
	if len(p.members) == 1 {
		if err := tagShaped("Patch", p.members[0].name); err != nil {
			return err
		}
	}
	if err := e.enter(1); err != nil {
		return err
	}
	defer e.leave(1)
	e.buf = append(e.buf, '{')
	for i, m := range p.members {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.str(m.name); err != nil {
			return err
		}
		e.buf = append(e.buf, ':')
		if m.delete {
			e.buf = append(e.buf, "null"...)
			continue
		}
		if err := e.encode(reflect.ValueOf(m.value), depth+1); err != nil {
			return at(err, "["+strconv.Quote(m.name)+"]")
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}
