//! The reference grader: execution accuracy E, parameter accuracy P and AST accuracy A
//! per instance (`../shared/spec/bfcl-opaque.md`, "Grader"; Table 2 of `targets.md`).
//!
//! [`grade`] is pure: it takes the model's calls, their execution outputs, the parsed
//! ground truth and the expected values, and never fails (bad model output is a score,
//! not an error). [`execute_model_calls`] / [`execute_ground_truth`] produce its inputs
//! with an [`Executor`].
//!
//! | metric | rule |
//! |---|---|
//! | E | #calls == #ground truth; each output equals the expected value: Python `==`, except `real_time_match` in `exec_multiple` (int/float within `[0.8e, 1.2e]`); an execution error is wrong |
//! | P | best pairing (over permutations) of the first #gt model calls with the ground truth; correct = gt keys whose model value is `==`; wrong function = all wrong; no gt params: 1.0 unless extra keys |
//! | A | per pair, mean of format valid, structure valid, type correctness, schema compliant, not hallucinated; mean over pairs |
//!
//! Details fixed by checking the authors' released verdicts (`released.rs` tests):
//! - A pairs the same truncated calls as P, under P's best pairing.
//! - "Hallucinated" means a model argument key that is not a parameter of the
//!   *ground-truth* function's doc, where the doc is looked up by the ground-truth
//!   function's *real* name among the tools the agent saw. In opaque settings the tools
//!   carry `function_k` names, the lookup fails and the check never fires; that is the
//!   reference `a`. `a_corrected` looks the doc up by the name the agent saw, and where
//!   that doc has no parameter schema (names / names+desc settings) falls back to the
//!   original doc, so a guessed parameter name that does not exist counts.
//! - A model answer with no calls at all scores A = 0 (all five components false); a
//!   padded slot beside other calls scores 0.4 (format valid, not hallucinated).
//! - `structural_match` is compared exactly, like `exact_match`.

use serde_json::Value;

use super::data::Category;
use super::executor::Executor;
use super::python::exception::PyException;
use super::python::value::PyValue;

/// One tool call as the agent emitted it.
#[derive(Debug, Clone)]
pub struct ModelCall {
    /// The function name as emitted (opaque in opaque settings).
    pub function: String,
    /// Keyword arguments in emitted order, or the raw text when they did not parse into
    /// an object.
    pub args: Result<Vec<(String, PyValue)>, String>,
}

/// One ground-truth call, parsed and evaluated (`pyparse::parse_call`).
#[derive(Debug, Clone)]
pub struct GroundTruthCall {
    /// The call as written in the data (the reference's cache key).
    pub source: String,
    /// The real function name.
    pub name: String,
    /// Keyword arguments in source order, values evaluated.
    pub args: Vec<(String, PyValue)>,
}

/// What [`grade`] needs about one instance.
#[derive(Debug, Clone, Copy)]
pub struct GradeInput<'a> {
    /// The instance's category (decides `real_time_match` tolerance).
    pub category: Category,
    /// The agent's calls, in order.
    pub model_calls: &'a [ModelCall],
    /// The execution output of each model call, same order.
    pub outputs: &'a [Result<PyValue, PyException>],
    /// The ground truth.
    pub ground_truth: &'a [GroundTruthCall],
    /// The expected value of each ground-truth call.
    pub expected: &'a [Result<PyValue, PyException>],
    /// `execution_result_type` of each ground-truth call.
    pub result_types: &'a [String],
    /// (real name, shown name) per tool.
    pub name_mapping: &'a [(String, String)],
    /// The tool docs the agent saw (shown names).
    pub tools_seen: &'a [Value],
    /// The original docs (real names, full schema); fallback for `a_corrected`.
    pub original_functions: &'a [Value],
}

/// The five AST components of one (model call, ground truth) pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AstComponents {
    /// False when the model made no call at all: the reference then scores every
    /// component 0, "not hallucinated" included.
    pub answered: bool,
    /// The call parsed into a name and arguments.
    pub format_valid: bool,
    /// It has a function and an argument object.
    pub structure_valid: bool,
    /// Fraction of ground-truth args with exactly the model value's Python type.
    pub type_correctness: f64,
    /// Structure valid, not hallucinated, all types correct (reference check).
    pub schema_compliant: bool,
    /// Reference hallucination check (lookup by real name).
    pub hallucinated: bool,
    /// Corrected hallucination check (lookup by shown name, original doc fallback).
    pub hallucinated_corrected: bool,
}

impl AstComponents {
    const EMPTY: AstComponents = AstComponents {
        answered: true,
        format_valid: false,
        structure_valid: false,
        type_correctness: 0.0,
        schema_compliant: false,
        hallucinated: false,
        hallucinated_corrected: false,
    };

    /// The reference A of this pair.
    pub fn score(&self) -> f64 {
        self.mean(self.schema_compliant, self.hallucinated)
    }

    /// A with the corrected hallucination check.
    pub fn score_corrected(&self) -> f64 {
        let schema =
            self.structure_valid && !self.hallucinated_corrected && self.type_correctness == 1.0;
        self.mean(schema, self.hallucinated_corrected)
    }

    fn mean(&self, schema: bool, hallucinated: bool) -> f64 {
        if !self.answered {
            return 0.0;
        }
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        (b(self.format_valid)
            + b(self.structure_valid)
            + self.type_correctness
            + b(schema)
            + b(!hallucinated))
            / 5.0
    }
}

/// The grade of one instance.
#[derive(Debug, Clone)]
pub struct InstanceScore {
    /// Execution accuracy verdict.
    pub e: bool,
    /// Why: `ok`, `wrong_count`, `execution_error: <text>`, `value_mismatch`,
    /// `format_error`, `expected_error: <text>`.
    pub e_reason: String,
    /// Parameter accuracy in [0, 1].
    pub p: f64,
    /// AST accuracy, reference hallucination check.
    pub a: f64,
    /// AST accuracy, corrected hallucination check.
    pub a_corrected: f64,
    /// The execution output of each model call.
    pub outputs: Vec<Result<PyValue, PyException>>,
    /// AST components per ground-truth call (under the chosen pairing).
    pub ast: Vec<AstComponents>,
}

/// Relative tolerance of `real_time_match`.
pub const REAL_TIME_TOLERANCE: f64 = 0.2;

/// Grades one instance. Never fails.
pub fn grade(input: &GradeInput<'_>) -> InstanceScore {
    let (e, e_reason) = execution_verdict(input);
    let n = input.ground_truth.len();
    let slots: Vec<Option<&ModelCall>> = (0..n).map(|i| input.model_calls.get(i)).collect();
    let (p, perm) = parameter_accuracy(input, &slots);
    let ast: Vec<AstComponents> = if input.model_calls.is_empty() {
        vec![
            AstComponents {
                answered: false,
                ..AstComponents::EMPTY
            };
            n
        ]
    } else {
        perm.iter()
            .enumerate()
            .map(|(gi, &ci)| ast_components(input, slots[ci], &input.ground_truth[gi]))
            .collect()
    };
    let mean = |f: &dyn Fn(&AstComponents) -> f64| {
        if ast.is_empty() {
            0.0
        } else {
            ast.iter().map(f).sum::<f64>() / ast.len() as f64
        }
    };
    InstanceScore {
        e,
        e_reason,
        p,
        a: mean(&AstComponents::score),
        a_corrected: mean(&AstComponents::score_corrected),
        outputs: input.outputs.to_vec(),
        ast,
    }
}

fn execution_verdict(input: &GradeInput<'_>) -> (bool, String) {
    if input.model_calls.len() != input.ground_truth.len() {
        return (false, "wrong_count".into());
    }
    for (i, call) in input.model_calls.iter().enumerate() {
        if call.args.is_err() {
            return (false, "format_error".into());
        }
        let output = match input.outputs.get(i) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return (false, format!("execution_error: {}", e.text())),
            None => return (false, "execution_error: not executed".into()),
        };
        let expected = match input.expected.get(i) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return (false, format!("expected_error: {}", e.text())),
            None => return (false, "expected_error: no expected value".into()),
        };
        let real_time = input.category == Category::Multiple
            && input.result_types.get(i).map(String::as_str) == Some("real_time_match");
        if !values_match(output, expected, real_time) {
            return (false, "value_mismatch".into());
        }
    }
    (true, "ok".into())
}

/// The E comparison of one output against its expected value.
pub fn values_match(output: &PyValue, expected: &PyValue, real_time: bool) -> bool {
    if real_time {
        if let (Some(out), Some(exp)) = (strict_number(output), strict_number(expected)) {
            // Python: `expected * (1 - 0.2) <= output <= expected * (1 + 0.2)`.
            return exp * (1.0 - REAL_TIME_TOLERANCE) <= out
                && out <= exp * (1.0 + REAL_TIME_TOLERANCE);
        }
    }
    output.py_eq(expected)
}

/// `type(x) in (int, float)` (bool excluded), as f64.
fn strict_number(v: &PyValue) -> Option<f64> {
    match v {
        PyValue::Int(_) | PyValue::Float(_) => v.as_f64(),
        _ => None,
    }
}

fn real_name<'a>(mapping: &'a [(String, String)], shown: &'a str) -> &'a str {
    mapping
        .iter()
        .find(|(_, s)| s == shown)
        .map(|(r, _)| r.as_str())
        .unwrap_or(shown)
}

fn shown_name<'a>(mapping: &'a [(String, String)], real: &'a str) -> &'a str {
    mapping
        .iter()
        .find(|(r, _)| r == real)
        .map(|(_, s)| s.as_str())
        .unwrap_or(real)
}

fn lookup<'a>(args: &'a [(String, PyValue)], key: &str) -> Option<&'a PyValue> {
    args.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Returns P and the chosen pairing (`perm[gt index] = slot index`).
fn parameter_accuracy(input: &GradeInput<'_>, slots: &[Option<&ModelCall>]) -> (f64, Vec<usize>) {
    let n = input.ground_truth.len();
    let total: usize = input.ground_truth.iter().map(|g| g.args.len()).sum();
    let mut best: Option<(usize, Vec<usize>)> = None;
    for perm in permutations(n) {
        let correct: usize = perm
            .iter()
            .enumerate()
            .map(|(gi, &ci)| correct_params(input, slots[ci], &input.ground_truth[gi]))
            .sum();
        if best.as_ref().is_none_or(|(c, _)| correct > *c) {
            best = Some((correct, perm));
        }
    }
    let (correct, perm) = best.unwrap_or((0, Vec::new()));
    let p = if total > 0 {
        correct as f64 / total as f64
    } else {
        let extras = perm.iter().enumerate().any(|(gi, &ci)| {
            let gt = &input.ground_truth[gi];
            match slots[ci].map(|c| &c.args) {
                Some(Ok(args)) => args.iter().any(|(k, _)| lookup(&gt.args, k).is_none()),
                _ => false,
            }
        });
        if extras {
            0.0
        } else {
            1.0
        }
    };
    (p, perm)
}

fn correct_params(input: &GradeInput<'_>, call: Option<&ModelCall>, gt: &GroundTruthCall) -> usize {
    let Some(call) = call else { return 0 };
    if real_name(input.name_mapping, &call.function) != gt.name {
        return 0;
    }
    let Ok(args) = &call.args else { return 0 };
    gt.args
        .iter()
        .filter(|(k, v)| lookup(args, k).is_some_and(|m| m.py_eq(v)))
        .count()
}

/// All permutations of `0..n` in lexicographic order (Python `itertools.permutations`);
/// beyond 8 calls only the identity, to bound the work.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n > 8 {
        return vec![(0..n).collect()];
    }
    let mut out = Vec::new();
    let mut current = Vec::with_capacity(n);
    let mut used = vec![false; n];
    fn rec(n: usize, cur: &mut Vec<usize>, used: &mut [bool], out: &mut Vec<Vec<usize>>) {
        if cur.len() == n {
            out.push(cur.clone());
            return;
        }
        for i in 0..n {
            if !used[i] {
                used[i] = true;
                cur.push(i);
                rec(n, cur, used, out);
                cur.pop();
                used[i] = false;
            }
        }
    }
    rec(n, &mut current, &mut used, &mut out);
    out
}

fn ast_components(
    input: &GradeInput<'_>,
    call: Option<&ModelCall>,
    gt: &GroundTruthCall,
) -> AstComponents {
    let Some(call) = call else {
        return AstComponents {
            format_valid: true,
            ..AstComponents::EMPTY
        };
    };
    let Ok(args) = &call.args else {
        return AstComponents::EMPTY;
    };
    let right_function = real_name(input.name_mapping, &call.function) == gt.name;
    let type_correctness = if !right_function {
        0.0
    } else if gt.args.is_empty() {
        1.0
    } else {
        let ok = gt
            .args
            .iter()
            .filter(|(k, v)| lookup(args, k).is_some_and(|m| same_type(m, v)))
            .count();
        ok as f64 / gt.args.len() as f64
    };
    let hallucinated =
        find_tool(input.tools_seen, &gt.name).is_some_and(|tool| has_unknown_param(tool, args));
    let shown = shown_name(input.name_mapping, &gt.name);
    let hallucinated_corrected = match find_tool(input.tools_seen, shown) {
        Some(tool) if tool.get("parameters").is_some() => has_unknown_param(tool, args),
        _ => find_tool(input.original_functions, &gt.name)
            .is_some_and(|tool| has_unknown_param(tool, args)),
    };
    AstComponents {
        answered: true,
        format_valid: true,
        structure_valid: true,
        type_correctness,
        schema_compliant: !hallucinated && type_correctness == 1.0,
        hallucinated,
        hallucinated_corrected,
    }
}

fn find_tool<'a>(tools: &'a [Value], name: &str) -> Option<&'a Value> {
    tools
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
}

fn has_unknown_param(tool: &Value, args: &[(String, PyValue)]) -> bool {
    let props = tool
        .get("parameters")
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object);
    args.iter()
        .any(|(k, _)| !props.is_some_and(|p| p.contains_key(k)))
}

/// Exactly the same Python type, recursing into equal-length lists/tuples and into the
/// expected dict's keys.
pub fn same_type(model: &PyValue, expected: &PyValue) -> bool {
    if model.type_name() != expected.type_name() {
        return false;
    }
    match (model, expected) {
        (PyValue::List(a), PyValue::List(b)) | (PyValue::Tuple(a), PyValue::Tuple(b)) => {
            a.len() != b.len() || a.iter().zip(b).all(|(x, y)| same_type(x, y))
        }
        (PyValue::Dict(a), PyValue::Dict(b)) => b.iter().all(|(k, v)| {
            a.iter()
                .find(|(k2, _)| k2.py_eq(k))
                .is_some_and(|(_, v2)| same_type(v2, v))
        }),
        _ => true,
    }
}

/// Executes each model call: the shown name is mapped back to the real function (a name
/// outside the mapping is executed as emitted, which for `function_9` is a NameError);
/// unparsable arguments are a `SyntaxError` without executing anything.
pub fn execute_model_calls(
    executor: &Executor,
    calls: &[ModelCall],
    name_mapping: &[(String, String)],
) -> Vec<Result<PyValue, PyException>> {
    calls
        .iter()
        .map(|call| match &call.args {
            Ok(args) => {
                let real = real_name(name_mapping, &call.function);
                executor.execute(real, &call.function, args)
            }
            Err(raw) => Err(PyException::new(
                "SyntaxError",
                format!("arguments are not a JSON object: {raw}"),
            )),
        })
        .collect()
}

/// Executes the ground truth under its real names (raw recorded text first, see
/// [`Executor::execute_ground_truth`]): the default expected values.
pub fn execute_ground_truth(
    executor: &Executor,
    ground_truth: &[GroundTruthCall],
) -> Vec<Result<PyValue, PyException>> {
    ground_truth
        .iter()
        .map(|g| executor.execute_ground_truth(&g.source, &g.name, &g.args))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(f: &str, args: &[(&str, PyValue)]) -> ModelCall {
        ModelCall {
            function: f.into(),
            args: Ok(args
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()),
        }
    }

    struct Case {
        category: Category,
        calls: Vec<ModelCall>,
        outputs: Vec<Result<PyValue, PyException>>,
        gt: Vec<GroundTruthCall>,
        expected: Vec<Result<PyValue, PyException>>,
        types: Vec<String>,
        mapping: Vec<(String, String)>,
        tools: Vec<Value>,
        original: Vec<Value>,
    }

    impl Case {
        fn binomial(calls: Vec<ModelCall>, outputs: Vec<Result<PyValue, PyException>>) -> Case {
            let doc = json!({"name": "calc_binomial_probability", "parameters": {"type": "object", "properties": {"n": {}, "k": {}, "p": {}}}});
            Case {
                category: Category::Simple,
                calls,
                outputs,
                gt: vec![GroundTruthCall {
                    source: "calc_binomial_probability(n=20, k=5, p=0.6)".into(),
                    name: "calc_binomial_probability".into(),
                    args: vec![
                        ("n".into(), PyValue::int(20)),
                        ("k".into(), PyValue::int(5)),
                        ("p".into(), PyValue::Float(0.6)),
                    ],
                }],
                expected: vec![Ok(PyValue::Float(0.0012944935222876579))],
                types: vec!["exact_match".into()],
                mapping: vec![("calc_binomial_probability".into(), "function_1".into())],
                tools: vec![json!({"name": "function_1", "description": ""})],
                original: vec![doc],
            }
        }

        fn grade(&self) -> InstanceScore {
            grade(&GradeInput {
                category: self.category,
                model_calls: &self.calls,
                outputs: &self.outputs,
                ground_truth: &self.gt,
                expected: &self.expected,
                result_types: &self.types,
                name_mapping: &self.mapping,
                tools_seen: &self.tools,
                original_functions: &self.original,
            })
        }
    }

    #[test]
    fn exact_answer_scores_one() {
        let c = Case::binomial(
            vec![call(
                "function_1",
                &[
                    ("n", PyValue::int(20)),
                    ("k", PyValue::int(5)),
                    ("p", PyValue::Float(0.6)),
                ],
            )],
            vec![Ok(PyValue::Float(0.0012944935222876579))],
        );
        let s = c.grade();
        assert!(s.e, "{}", s.e_reason);
        assert_eq!((s.p, s.a, s.a_corrected), (1.0, 1.0, 1.0));
    }

    /// Released verdict: `function_1()` with no args -> E execution error, P 0, A 0.6.
    #[test]
    fn empty_args_scores_point_six() {
        let err = PyException::new(
            "TypeError",
            "function_1() missing 3 required positional arguments: 'n', 'k', and 'p'",
        );
        let s = Case::binomial(vec![call("function_1", &[])], vec![Err(err)]).grade();
        assert!(!s.e);
        assert!(s
            .e_reason
            .starts_with("execution_error: function_1() missing"));
        assert_eq!(s.p, 0.0);
        assert!((s.a - 0.6).abs() < 1e-12);
    }

    /// Released: `[]` -> A 0.0; two calls -> wrong_count, P/A from the first call only.
    #[test]
    fn counts_and_truncation() {
        let s = Case::binomial(vec![], vec![]).grade();
        assert_eq!(
            (s.e, s.e_reason.as_str(), s.p, s.a),
            (false, "wrong_count", 0.0, 0.0)
        );
        let good = call(
            "function_1",
            &[
                ("n", PyValue::int(20)),
                ("k", PyValue::int(5)),
                ("p", PyValue::Float(0.6)),
            ],
        );
        let bad = call("function_1", &[("n", PyValue::int(20))]);
        let s = Case::binomial(vec![bad.clone(), good.clone()], vec![]).grade();
        assert_eq!(s.e_reason, "wrong_count");
        assert!(
            (s.p - 1.0 / 3.0).abs() < 1e-12,
            "only the first call is paired"
        );
        let s = Case::binomial(vec![good, bad], vec![]).grade();
        assert_eq!(s.p, 1.0);
    }

    /// Released: int where the ground truth has float is a type error (A 0.6), and
    /// `5040 == 5040.0` still counts for P.
    #[test]
    fn types_and_equality() {
        let c = Case::binomial(
            vec![call(
                "function_1",
                &[
                    ("n", PyValue::Float(20.0)),
                    ("k", PyValue::int(5)),
                    ("p", PyValue::Float(0.6)),
                ],
            )],
            vec![Ok(PyValue::Float(0.0012944935222876579))],
        );
        let s = c.grade();
        assert!(s.e);
        assert_eq!(s.p, 1.0);
        assert!((s.ast[0].type_correctness - 2.0 / 3.0).abs() < 1e-12);
        assert!(!s.ast[0].schema_compliant);
    }

    #[test]
    fn hallucination_reference_vs_corrected() {
        let extra = call(
            "function_1",
            &[
                ("n", PyValue::int(20)),
                ("k", PyValue::int(5)),
                ("p", PyValue::Float(0.6)),
                ("q", PyValue::int(1)),
            ],
        );
        let mut c = Case::binomial(vec![extra], vec![Ok(PyValue::Float(0.5))]);
        let s = c.grade();
        assert!(
            !s.ast[0].hallucinated,
            "reference lookup by real name fails"
        );
        assert!(s.ast[0].hallucinated_corrected);
        assert_eq!(s.a, 1.0);
        assert!((s.a_corrected - 0.6).abs() < 1e-12);
        // Gold: the real name is found, both fire.
        c.mapping = vec![(
            "calc_binomial_probability".into(),
            "calc_binomial_probability".into(),
        )];
        c.tools = c.original.clone();
        c.calls[0].function = "calc_binomial_probability".into();
        let s = c.grade();
        assert!(s.ast[0].hallucinated && s.ast[0].hallucinated_corrected);
    }

    #[test]
    fn real_time_match_only_in_multiple() {
        assert!(values_match(&PyValue::int(110), &PyValue::int(100), true));
        assert!(values_match(
            &PyValue::Float(80.0),
            &PyValue::int(100),
            true
        ));
        assert!(!values_match(
            &PyValue::Float(79.9),
            &PyValue::int(100),
            true
        ));
        assert!(!values_match(
            &PyValue::Float(-10.0),
            &PyValue::Float(-10.0),
            true
        ));
        assert!(values_match(
            &PyValue::int(5040),
            &PyValue::Float(5040.0),
            false
        ));
        let mut c = Case::binomial(
            vec![call(
                "function_1",
                &[
                    ("n", PyValue::int(20)),
                    ("k", PyValue::int(5)),
                    ("p", PyValue::Float(0.6)),
                ],
            )],
            vec![Ok(PyValue::Float(110.0))],
        );
        c.expected = vec![Ok(PyValue::Float(100.0))];
        c.types = vec!["real_time_match".into()];
        assert!(
            !c.grade().e,
            "exec_simple is exact even for real_time_match"
        );
        c.category = Category::Multiple;
        assert!(c.grade().e);
    }

    #[test]
    fn unparsable_args_never_panic() {
        let c = Case::binomial(
            vec![ModelCall {
                function: "function_1".into(),
                args: Err("{n: 20".into()),
            }],
            vec![Err(PyException::new("SyntaxError", "x"))],
        );
        let s = c.grade();
        assert_eq!(s.e_reason, "format_error");
        assert_eq!(s.p, 0.0);
        assert_eq!(s.a, 0.2);
    }

    #[test]
    fn permutations_lexicographic() {
        assert_eq!(
            permutations(3),
            vec![
                vec![0, 1, 2],
                vec![0, 2, 1],
                vec![1, 0, 2],
                vec![1, 2, 0],
                vec![2, 0, 1],
                vec![2, 1, 0]
            ]
        );
    }
}
