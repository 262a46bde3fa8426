package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad/api"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// POST /v1/jobs/parse: a jobspec in HCL2 to an api.Job, as
// command/agent/job_endpoint.go JobsParseRequest does with jobspec2.ParseWithConfig
// (jobspec2/parse.go, types.config.go, types.variables.go), for the subset of
// the jobspec that rollboot's own job files use:
//
//   - `variable "name" { type, description, default }` blocks, set from the
//     request's Variables, read as the content of a variables file
//     (ParseConfig.VarContent); a variable without a value or default is
//     "Unset variable" (Variable.Value); a value for an undeclared variable is
//     refused; values are converted to the declared type.
//   - One `job "id"` block, decoded into api.Job by the `hcl` tags of the API's
//     types, as jobspec2's decoder does: `var.x` evaluated; every other reference
//     (${attr.cpu.arch}, ${meta.x}, ${node.unique.name}, ${NOMAD_TASK_DIR}) left
//     as the literal "${...}" for the client to interpolate (jobConfig.EvalContext
//     UndefinedVariable); blocks of map fields (env, meta, config, options) read
//     as attributes, a config's nested blocks as lists of objects
//     (hclutil.BlocksAsAttrs); durations from strings such as "30s"; a
//     constraint's operator "=" by default (hcl_conversions.go decodeConstraint).
//   - Then normalized as parse_job.go normalizeJob does (normalizeJob below).
//
// Not modelled (400 "not modelled by the emulator"): locals, functions, dynamic
// blocks, JSON jobspecs, and attributes or blocks the API types do not have.

func (s *Sim) registerJobParseRoute(mux *http.ServeMux) {
	mux.HandleFunc("/v1/jobs/parse", methods(s.handleJobsParse, http.MethodPut, http.MethodPost))
}

// handleJobsParse: parse-job or submit-job in the request's namespace
// (JobsParseRequest: AllowNsOp parse-job || submit-job), 400 "Job spec is empty"
// without JobHCL, 400 "Failed to parse job: ..." for a spec that does not parse.
func (s *Sim) handleJobsParse(w http.ResponseWriter, r *http.Request) {
	ns := requestNamespace(r)
	if s.authorize(w, r, func(t *Token) bool {
		return t.AllowNamespace(ns, "parse-job") || t.AllowNamespace(ns, "submit-job")
	}) == nil {
		return
	}
	var in api.JobsParseRequest
	if err := decodeBody(r, &in); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	if in.JobHCL == "" {
		simhttp.WriteError(w, http.StatusBadRequest, "Job spec is empty")
		return
	}
	job, err := ParseJobHCL(in.JobHCL, in.Variables)
	if err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "Failed to parse job: "+err.Error())
		return
	}
	if in.Canonicalize {
		job.Canonicalize()
	}
	writeJSON(w, http.StatusOK, job)
}

// ParseJobHCL parses a jobspec with variable values written as a variables
// file (name = value lines), as POST /v1/jobs/parse does.
func ParseJobHCL(src, varContent string) (*api.Job, error) {
	f, diags := hclsyntax.ParseConfig([]byte(src), "input.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	body := f.Body.(*hclsyntax.Body)
	if len(body.Attributes) > 0 {
		for _, a := range body.Attributes {
			return nil, fmt.Errorf("%s: unexpected argument %q at the top level", a.SrcRange, a.Name)
		}
	}
	var decls []*hclsyntax.Block
	var jobBlock *hclsyntax.Block
	for _, b := range body.Blocks {
		switch b.Type {
		case "variable":
			decls = append(decls, b)
		case "job":
			if jobBlock != nil {
				return nil, fmt.Errorf("%s: Duplicate job block: only one job block is allowed", b.DefRange())
			}
			if len(b.Labels) != 1 {
				return nil, fmt.Errorf("%s: a job block has one label, the job's ID", b.DefRange())
			}
			jobBlock = b
		default:
			return nil, fmt.Errorf("%s: block %q is not modelled by the emulator", b.DefRange(), b.Type)
		}
	}
	if jobBlock == nil {
		return nil, fmt.Errorf("Missing job block: a job block is required")
	}
	vars, err := jobVariables(decls, varContent)
	if err != nil {
		return nil, err
	}
	ctx := &hcl.EvalContext{Variables: runtimeReferences(jobBlock.Body)}
	ctx.Variables["var"] = cty.ObjectVal(vars)
	job := &api.Job{}
	if err := decodeBlock(jobBlock.Body, ctx, reflect.ValueOf(job).Elem()); err != nil {
		return nil, err
	}
	job.ID = pointerOf(jobBlock.Labels[0])
	if job.Name == nil {
		job.Name = job.ID
	}
	normalizeJob(job)
	return job, nil
}

// normalizeJob is the part of jobspec2/parse_job.go normalizeJob that applies
// to the subset parsed: a port with a static value is reserved
// (normalizeNetworkPorts); templates get their defaults (normalizeTemplates:
// change_mode restart, perms 0644, splay 5s, error_on_missing_key false); and
// the default identity (no name, or "default") moves from Identities to
// Task.Identity.
func normalizeJob(job *api.Job) {
	for _, tg := range job.TaskGroups {
		for _, n := range tg.Networks {
			var dynamic, reserved []api.Port
			for _, p := range n.DynamicPorts {
				if p.Value > 0 {
					reserved = append(reserved, p)
				} else {
					dynamic = append(dynamic, p)
				}
			}
			n.DynamicPorts, n.ReservedPorts = dynamic, reserved
		}
		for _, t := range tg.Tasks {
			for _, tm := range t.Templates {
				if tm.ChangeMode == nil {
					tm.ChangeMode = pointerOf("restart")
				}
				if tm.Perms == nil {
					tm.Perms = pointerOf("0644")
				}
				if tm.Splay == nil {
					tm.Splay = pointerOf(5 * time.Second)
				}
				if tm.ErrMissingKey == nil {
					tm.ErrMissingKey = pointerOf(false)
				}
			}
			for i, id := range t.Identities {
				if id.Name == "" || id.Name == "default" {
					t.Identity = id
					t.Identities = slices.Delete(t.Identities, i, i+1)
					break
				}
			}
		}
	}
}

// jobVariables evaluates the variable blocks with the given values
// (types.variables.go: a value, else the default, else "Unset variable").
func jobVariables(decls []*hclsyntax.Block, varContent string) (map[string]cty.Value, error) {
	given := map[string]*hcl.Attribute{}
	if strings.TrimSpace(varContent) != "" {
		vf, diags := hclsyntax.ParseConfig([]byte(varContent), "input.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			return nil, fmt.Errorf("unable to parse var content: %v", diags)
		}
		attrs, diags := vf.Body.JustAttributes()
		if diags.HasErrors() {
			return nil, fmt.Errorf("unable to parse var content: %v", diags)
		}
		given = attrs
	}
	out := map[string]cty.Value{}
	declared := map[string]bool{}
	for _, b := range decls {
		if len(b.Labels) != 1 {
			return nil, fmt.Errorf("%s: a variable block has one label, its name", b.DefRange())
		}
		name := b.Labels[0]
		if declared[name] {
			return nil, fmt.Errorf("%s: Duplicate variable: duplicate %s variable definition found", b.DefRange(), name)
		}
		declared[name] = true
		ty := cty.DynamicPseudoType
		if a := b.Body.Attributes["type"]; a != nil {
			t, diags := typeexpr.TypeConstraint(a.Expr)
			if diags.HasErrors() {
				return nil, diags
			}
			ty = t
		}
		var val cty.Value
		switch {
		case given[name] != nil:
			v, diags := given[name].Expr.Value(nil)
			if diags.HasErrors() {
				return nil, diags
			}
			val = v
		case b.Body.Attributes["default"] != nil:
			v, diags := b.Body.Attributes["default"].Expr.Value(nil)
			if diags.HasErrors() {
				return nil, diags
			}
			val = v
		default:
			return nil, fmt.Errorf("%s: Unset variable %q: a used variable must be set or have a default value", b.DefRange(), name)
		}
		cv, err := convert.Convert(val, ty)
		if err != nil {
			return nil, fmt.Errorf("%s: variable %q: %v", b.DefRange(), name, err)
		}
		out[name] = cv
	}
	for name, a := range given {
		if !declared[name] {
			return nil, fmt.Errorf("%s: Undefined variable %q: no variable block declares it", a.NameRange, name)
		}
	}
	return out, nil
}

// runtimeReferences maps every reference in the job other than var.x to the
// literal "${...}" it was written as, as jobspec2 leaves them for the client
// (attr, meta, node, NOMAD_*, env).
func runtimeReferences(body *hclsyntax.Body) map[string]cty.Value {
	tree := map[string]any{}
	_ = hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		e, ok := n.(hclsyntax.Expression)
		if !ok {
			return nil
		}
		for _, tr := range e.Variables() {
			var path []string
			for _, step := range tr {
				switch st := step.(type) {
				case hcl.TraverseRoot:
					path = append(path, st.Name)
				case hcl.TraverseAttr:
					path = append(path, st.Name)
				}
			}
			if len(path) == 0 || path[0] == "var" {
				continue
			}
			m := tree
			for i, p := range path {
				if i == len(path)-1 {
					if _, isMap := m[p].(map[string]any); !isMap {
						m[p] = "${" + strings.Join(path, ".") + "}"
					}
					break
				}
				next, isMap := m[p].(map[string]any)
				if !isMap {
					next = map[string]any{}
					m[p] = next
				}
				m = next
			}
		}
		return nil
	})
	out := map[string]cty.Value{}
	for k, v := range tree {
		out[k] = ctyTree(v)
	}
	return out
}

func ctyTree(v any) cty.Value {
	if s, ok := v.(string); ok {
		return cty.StringVal(s)
	}
	obj := map[string]cty.Value{}
	for k, sub := range v.(map[string]any) {
		obj[k] = ctyTree(sub)
	}
	return cty.ObjectVal(obj)
}

// hclField is a struct field with an `hcl:"name,kind"` tag.
type hclField struct {
	index int
	name  string
	kind  string // "label", "optional", "" (required attribute), "block"
}

func hclFields(t reflect.Type) []hclField {
	var out []hclField
	for i := 0; i < t.NumField(); i++ {
		tag, ok := t.Field(i).Tag.Lookup("hcl")
		if !ok {
			continue
		}
		name, kind, _ := strings.Cut(tag, ",")
		out = append(out, hclField{index: i, name: name, kind: kind})
	}
	return out
}

var durationType = reflect.TypeOf(time.Duration(0))

// decodeBlock decodes a block's body into the struct rv by its hcl tags.
func decodeBlock(body *hclsyntax.Body, ctx *hcl.EvalContext, rv reflect.Value) error {
	fields := hclFields(rv.Type())
	byName := map[string]hclField{}
	for _, f := range fields {
		if f.kind != "label" {
			byName[f.name] = f
		}
	}
	for _, f := range fields {
		if f.kind == "" {
			if _, ok := body.Attributes[f.name]; !ok {
				return fmt.Errorf("%s: Missing required argument %q", body.SrcRange, f.name)
			}
		}
	}
	names := make([]string, 0, len(body.Attributes))
	for n := range body.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := body.Attributes[n]
		f, ok := byName[n]
		if !ok {
			return fmt.Errorf("%s: Unsupported argument %q: not in the jobspec (or not modelled by the emulator)", a.NameRange, n)
		}
		v, diags := a.Expr.Value(ctx)
		if diags.HasErrors() {
			return diags
		}
		if err := setValue(rv.Field(f.index), v); err != nil {
			return fmt.Errorf("%s: %s: %v", a.SrcRange, n, err)
		}
	}
	for _, b := range body.Blocks {
		f, ok := byName[b.Type]
		if !ok || f.kind != "block" {
			return fmt.Errorf("%s: Unsupported block type %q: not in the jobspec (or not modelled by the emulator)", b.DefRange(), b.Type)
		}
		if err := decodeChildBlock(b, ctx, rv.Field(f.index)); err != nil {
			return err
		}
	}
	if c, ok := rv.Addr().Interface().(*api.Constraint); ok && c.Operand == "" {
		c.Operand = "="
	}
	return nil
}

// decodeChildBlock decodes block b into field fv: a struct (pointer), a slice
// of them, or a map read as attributes.
func decodeChildBlock(b *hclsyntax.Block, ctx *hcl.EvalContext, fv reflect.Value) error {
	switch {
	case fv.Kind() == reflect.Map:
		m, err := blockAsObject(b.Body, ctx)
		if err != nil {
			return err
		}
		return setValue(fv, m)
	case fv.Kind() == reflect.Slice:
		elem := reflect.New(fv.Type().Elem()).Elem()
		if err := decodeLabelledStruct(b, ctx, elem); err != nil {
			return err
		}
		fv.Set(reflect.Append(fv, elem))
		return nil
	case fv.Kind() == reflect.Pointer:
		if !fv.IsNil() {
			return fmt.Errorf("%s: Duplicate %s block", b.DefRange(), b.Type)
		}
		return decodeLabelledStruct(b, ctx, fv)
	}
	return fmt.Errorf("%s: block %q is not modelled by the emulator", b.DefRange(), b.Type)
}

// decodeLabelledStruct decodes b into sv (a struct or a pointer to one),
// setting its label fields from the block's labels.
func decodeLabelledStruct(b *hclsyntax.Block, ctx *hcl.EvalContext, sv reflect.Value) error {
	if sv.Kind() == reflect.Pointer {
		sv.Set(reflect.New(sv.Type().Elem()))
		sv = sv.Elem()
	}
	li := 0
	for _, f := range hclFields(sv.Type()) {
		if f.kind != "label" {
			continue
		}
		if li >= len(b.Labels) {
			return fmt.Errorf("%s: block %s needs a label", b.DefRange(), b.Type)
		}
		if err := setValue(sv.Field(f.index), cty.StringVal(b.Labels[li])); err != nil {
			return err
		}
		li++
	}
	if li != len(b.Labels) {
		return fmt.Errorf("%s: block %s has %d labels, want %d", b.DefRange(), b.Type, len(b.Labels), li)
	}
	return decodeBlock(b.Body, ctx, sv)
}

// blockAsObject reads a block of a map field as an object: its attributes,
// and its nested blocks as lists of objects by type (hclutil.BlocksAsAttrs).
func blockAsObject(body *hclsyntax.Body, ctx *hcl.EvalContext) (cty.Value, error) {
	obj := map[string]cty.Value{}
	for n, a := range body.Attributes {
		v, diags := a.Expr.Value(ctx)
		if diags.HasErrors() {
			return cty.NilVal, diags
		}
		obj[n] = v
	}
	nested := map[string][]cty.Value{}
	for _, b := range body.Blocks {
		v, err := blockAsObject(b.Body, ctx)
		if err != nil {
			return cty.NilVal, err
		}
		nested[b.Type] = append(nested[b.Type], v)
	}
	for n, vs := range nested {
		obj[n] = cty.TupleVal(vs)
	}
	return cty.ObjectVal(obj), nil
}

// setValue stores an HCL value into a field of the API's types.
func setValue(fv reflect.Value, v cty.Value) error {
	if v.IsNull() {
		return nil
	}
	if fv.Kind() == reflect.Pointer {
		p := reflect.New(fv.Type().Elem())
		if err := setValue(p.Elem(), v); err != nil {
			return err
		}
		fv.Set(p)
		return nil
	}
	if fv.Type() == durationType {
		if v.Type() != cty.String {
			return fmt.Errorf("want a duration such as \"30s\"")
		}
		d, err := time.ParseDuration(v.AsString())
		if err != nil {
			return err
		}
		fv.SetInt(int64(d))
		return nil
	}
	if fv.Kind() == reflect.String {
		sv, err := convert.Convert(v, cty.String)
		if err != nil {
			return err
		}
		fv.SetString(sv.AsString())
		return nil
	}
	if fv.Kind() == reflect.Map && fv.Type().Elem().Kind() == reflect.String {
		mv, err := convert.Convert(v, cty.Map(cty.String))
		if err != nil {
			return err
		}
		v = mv
	}
	// Everything else through JSON: numbers, booleans, lists, maps, any.
	raw, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return err
	}
	p := reflect.New(fv.Type())
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		return fmt.Errorf("want %s: %v", fv.Type(), err)
	}
	fv.Set(p.Elem())
	return nil
}
