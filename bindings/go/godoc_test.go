package agentstate

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// Every exported name of the package has a doc comment.
func TestEveryExportedNameIsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	p := doc.New(pkgs["agentstate"], "agentstate", 0)
	if p.Doc == "" {
		t.Error("no package documentation")
	}
	var missing []string
	check := func(name, text string) {
		if ast.IsExported(name) && strings.TrimSpace(text) == "" {
			missing = append(missing, name)
		}
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, spec := range v.Decl.Specs {
				vspec := spec.(*ast.ValueSpec)
				for _, n := range vspec.Names {
					doc := v.Doc
					if vspec.Doc != nil {
						doc += vspec.Doc.Text()
					}
					if vspec.Comment != nil {
						doc += vspec.Comment.Text()
					}
					if len(v.Decl.Specs) > 1 && vspec.Doc == nil && vspec.Comment == nil {
						doc = ""
					}
					check(n.Name, doc)
				}
			}
		}
	}
	values(p.Consts)
	values(p.Vars)
	for _, f := range p.Funcs {
		check(f.Name, f.Doc)
	}
	for _, typ := range p.Types {
		check(typ.Name, typ.Doc)
		values(typ.Consts)
		values(typ.Vars)
		for _, f := range typ.Funcs {
			check(f.Name, f.Doc)
		}
		for _, m := range typ.Methods {
			check(typ.Name+"."+m.Name, m.Doc)
		}
		for _, spec := range typ.Decl.Specs {
			st, ok := spec.(*ast.TypeSpec).Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, f := range st.Fields.List {
				for _, n := range f.Names {
					text := ""
					if f.Doc != nil {
						text = f.Doc.Text()
					}
					if f.Comment != nil {
						text += f.Comment.Text()
					}
					if ast.IsExported(n.Name) && text == "" && !selfExplanatory[typ.Name+"."+n.Name] {
						missing = append(missing, typ.Name+"."+n.Name)
					}
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("undocumented exported names: %s", strings.Join(missing, ", "))
	}
}

// Fields documented by their type's comment.
var selfExplanatory = map[string]bool{
	"MapEntry.Key": true, "MapEntry.Value": true,
	"TypedArray.Type": true, "TypedArray.Data": true,
	"RegExp.Source": true, "RegExp.Flags": true,
}

// Statements the README, the book's Go page and the doc comments used to make that the library
// contradicts: the change log is a setting of each agent, not of the store or the file
// (TestChangeLogIsPerAgent shows it); a server that does not answer is bounded by ServerTimeout,
// not BusyTimeout; the expiry batch is DefaultExpireLimit. They must not come back.
func TestDocsDoNotContradictTheLibrary(t *testing.T) {
	texts := map[string]string{}
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := f.Name()
		if name == "README.md" || (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) || name == "example_test.go" {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			// Comments wrap anywhere: compare with the line breaks and comment markers gone.
			text := strings.NewReplacer("\n//\t", " ", "\n// ", " ", "\n//", " ", "\n\t// ", " ", "\n  ", " ", "\n", " ").Replace(string(b))
			texts[name] = strings.Join(strings.Fields(text), " ")
		}
	}
	// The book's Getting started page for Go, where the package's reference part lives.
	page, err := os.ReadFile(goPage)
	if err != nil {
		t.Fatal(err)
	}
	texts[goPage] = strings.Join(strings.Fields(string(page)), " ")
	for _, claim := range []string{
		"recorded in the store file",
		"the store's change log",
		"the store's setting",
		"every handle on the file",
		"every Agent on the file",
		"so every Agent on it logs",
		"BusyTimeout bounds the connect",
		"reached within BusyTimeout",
		"release before",
		"Library notes (0.",
		"at most `limit` (0 is 100)",
	} {
		for name, text := range texts {
			if strings.Contains(text, claim) {
				t.Errorf("%s says %q, which the library contradicts", name, claim)
			}
		}
	}
	if want := fmt.Sprintf("0 is `DefaultExpireLimit`, %d,%03d", DefaultExpireLimit/1000, DefaultExpireLimit%1000); !strings.Contains(texts[goPage], want) {
		t.Errorf("%s does not give the expiry batch as %q", goPage, want)
	}
}
