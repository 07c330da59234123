package v1_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// kubeRayAPIFiles are the files of KubeRay's apis/ray/v1 package that define its four kinds.
var kubeRayAPIFiles = []string{"raycluster_types.go", "rayjob_types.go", "rayservice_types.go", "raycronjob_types.go", "groupversion_info.go", "register.go"}

// goDeviations are declarations that differ from KubeRay's release on purpose, with the reason.
var goDeviations = map[string]string{
	// KubeRay made it optional after v1.5.0, when the rocksdb backend arrived; a required field would force
	// rocksdb users to send an empty Redis address.
	"GcsFaultToleranceOptions.RedisAddress": "string json:redisAddress,omitempty",
	// KubeRay v1.7 made it optional, beside the new jobDeploymentStatus (exactly one of them is set).
	"DeletionCondition.JobStatus": "*JobStatus json:jobStatus,omitempty",
	// KubeRay v1.7 made it a pointer (v1.6's is a bool).
	"RayCronJobSpec.Suspend": "*bool json:suspend,omitempty",
}

// TestGoIdentifiersMatchKubeRay checks that every exported type, struct field (with its Go type and JSON tag),
// constant (with its value), variable and function of KubeRay's RayCluster API exists here identically, so
// that code written against KubeRay's package compiles against this one.
func TestGoIdentifiersMatchKubeRay(t *testing.T) {
	var theirFiles []string
	for _, f := range kubeRayAPIFiles {
		theirFiles = append(theirFiles, filepath.Join(kubeRayDir(t), "apis", "ray", "v1", f))
	}
	ourFiles, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	theirs, ours := apiDecls(t, theirFiles), apiDecls(t, ourFiles)
	for _, name := range sortedKeys(theirs) {
		got, ok := ours[name]
		switch {
		case !ok:
			t.Errorf("%s is missing (KubeRay: %s)", name, theirs[name])
		case goDeviations[name] != "":
			if got != goDeviations[name] {
				t.Errorf("%s = %s, want the documented deviation %s", name, got, goDeviations[name])
			}
		case got != theirs[name]:
			t.Errorf("%s = %s, KubeRay's = %s", name, got, theirs[name])
		}
	}
}

// apiDecls maps each exported top-level name, and each exported struct field as "Type.Field", to a rendering
// of its declaration: the type expression (and JSON tag) for types and fields, the value for constants.
func apiDecls(t *testing.T, files []string) map[string]string {
	t.Helper()
	decls := map[string]string{}
	fset := token.NewFileSet()
	render := func(n ast.Node) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					decls[d.Name.Name] = "func" + strings.TrimPrefix(render(d.Type), "func")
				}
			case *ast.GenDecl:
				addGenDecl(decls, d, render)
			}
		}
	}
	return decls
}

// addGenDecl records the exported types, struct fields, constants and variables of d.
func addGenDecl(decls map[string]string, d *ast.GenDecl, render func(ast.Node) string) {
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			if !s.Name.IsExported() {
				continue
			}
			st, ok := s.Type.(*ast.StructType)
			if !ok {
				decls[s.Name.Name] = "type " + render(s.Type)
				continue
			}
			decls[s.Name.Name] = "struct"
			for _, f := range st.Fields.List {
				tag := ""
				if f.Tag != nil {
					tag = reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
				}
				names := f.Names
				if len(names) == 0 { // embedded field: named after its type
					names = []*ast.Ident{ast.NewIdent(strings.TrimPrefix(render(f.Type), "*"))}
				}
				for _, n := range names {
					decls[s.Name.Name+"."+n.Name] = render(f.Type) + " json:" + tag
				}
			}
		case *ast.ValueSpec:
			for i, n := range s.Names {
				if !n.IsExported() {
					continue
				}
				value := ""
				if i < len(s.Values) {
					value = render(s.Values[i])
				}
				typ := ""
				if s.Type != nil {
					typ = render(s.Type)
				}
				decls[n.Name] = d.Tok.String() + " " + typ + " = " + value
			}
		}
	}
}
