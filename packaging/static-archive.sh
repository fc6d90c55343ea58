#!/usr/bin/env bash
# static-archive.sh IN.a LIB.so OUT.a: makes the installable static archive from cargo's.
#
# Cargo's libagent_state.a holds every object of the crate, of the Rust standard library and of
# the bundled SQLite, each with its global symbols: linked next to another SQLite (or another
# Rust static library) it clashes ("multiple definition"), or silently replaces the program's
# own SQLite. OUT.a holds one object instead, pre-linked with `ld -r`, in which only the
# symbols that LIB.so exports (the C API, agent_*) stay global; everything else is local to it.
# Unreferenced sections are dropped (--gc-sections, rooted at the API), and so are debug
# information and the LLVM bitcode that the standard library's objects embed (binutils' LLVM
# plugin, where installed, chokes on the merged bitcode).
#
# Then the object is made small, as it ships prebuilt inside the Go module (make dist). Rust and
# SQLite are compiled with a section per function and per constant: after the first pass the
# object still has some 26,000 sections, whose headers and long mangled names weighed more than
# 3 MB of the 13.5 MB. A second `ld -r` merges them into one .text, .rodata, .data... each
# (a program linking the archive could no longer drop single unused functions with
# --gc-sections, but this one already holds only what the API reaches). Sections that must
# stay apart keep their own: COMDAT group members and mergeable strings and constants.
# `--strip-unneeded` then drops the local symbols that no relocation needs (those it needs
# stay), and .comment the compilers' version strings. 13.5 MB became 9.7 MB; the names of the
# remaining local symbols (about 0.5 MB) are kept, for backtraces and profilers.
#
# Needs GNU binutils (ld, objcopy, ar, readelf); LD, OBJCOPY, AR and READELF override them.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    echo "usage: $0 IN.a LIB.so OUT.a" >&2
    exit 2
fi
in="$1" so="$2" out="$3"
LD="${LD:-ld}" OBJCOPY="${OBJCOPY:-objcopy}" AR="${AR:-ar}" READELF="${READELF:-readelf}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Defined global symbols, one name a line: readelf -s prints Num: Value Size Type Bind Vis Ndx Name.
defined_globals() {
    "$READELF" "$@" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $8 != "" { sub(/@.*/, "", $8); print $8 }' | sort -u
}

defined_globals --dyn-syms -W "$so" >"$tmp/api"
if [[ ! -s "$tmp/api" ]] || grep -v '^agent_' "$tmp/api" >&2; then
    echo "$0: $so should export agent_* symbols only (and some)" >&2
    exit 1
fi

roots=()
while read -r sym; do roots+=(-u "$sym"); done <"$tmp/api"
"$LD" -r --gc-sections "${roots[@]}" --whole-archive "$in" --no-whole-archive -o "$tmp/combined.o"

# The linker script of the second pass. Its first rules claim, by name, the sections that stay
# apart (in a linker script the first rule a section matches wins): those in a COMDAT group
# (flag G) and the mergeable ones (flag M: .rodata.str1.1, .rodata.cst16...). readelf -SW
# prints "[Nr] Name Type Address Off Size ES Flg Lk Inf Al", Flg empty for no flags.
{
    echo "SECTIONS"
    echo "{"
    "$READELF" -SW "$tmp/combined.o" | sed -n 's/^ *\[ *[0-9]*\] //p' |
        awk '$2 != "RELA" && $7 ~ /^[A-Za-z]+$/ && $7 ~ /[GM]/ { printf "  %s 0 : { *(%s) }\n", $1, $1 }' | sort -u
    for name in .text .rodata .data.rel.ro .data .bss .tdata .tbss .gcc_except_table; do
        printf '  %s 0 : { *(%s %s.*) }\n' "$name" "$name" "$name"
    done
    echo "}"
} >"$tmp/merge.ld"
"$LD" -r -T "$tmp/merge.ld" "$tmp/combined.o" -o "$tmp/merged.o"

"$OBJCOPY" --strip-debug --strip-unneeded --remove-section=.comment --remove-section=.llvmbc \
    --remove-section=.llvmcmd --remove-section=.llvm_addrsig --keep-global-symbols="$tmp/api" \
    "$tmp/merged.o" "$tmp/agent_state.o"

defined_globals -sW "$tmp/agent_state.o" >"$tmp/kept"
if ! diff -u "$tmp/api" "$tmp/kept" >&2; then
    echo "$0: the pre-linked object's global symbols differ from $so's exports" >&2
    exit 1
fi

rm -f "$out"
"$AR" rcs "$out" "$tmp/agent_state.o"
