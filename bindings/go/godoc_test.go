package agentstate

import (
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
