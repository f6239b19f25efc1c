//! A tiny evaluator for the Python expressions that `estimate_derivative` passes to
//! `eval` (BFCL's original does `func = eval(function)` and then calls `func`).
//!
//! The data only uses `lambda x: <polynomial>` strings, but agents send other things
//! (`'3*x**2 + 2*x + 1'`, `'square'`, `'4x^3'`, ...), and what Python answers to those
//! (`'int' object is not callable`, `name 'square' is not defined`, `invalid decimal
//! literal (<string>, line 1)`) is what the agent learns from. So this evaluator covers
//! the expression grammar (lambda, conditional expressions, `or`/`and`/`not`,
//! comparisons, `| ^ &`, arithmetic, unary operators, `**`, calls, attribute access on
//! the `math` module, literals, tuples/lists and subscripts) with CPython's numeric
//! semantics and error texts. Names resolve as inside the original function: the
//! eval locals (`function`, `x`), then the module globals (`math`), then a few builtins
//! (`abs`, `float`, `int`, `round`, `pow`, `min`, `max`). Everything else is a
//! `NameError`. Nothing is ever executed outside this interpreter; recursion is bounded.

use std::cell::Cell;
use std::rc::Rc;

use num_bigint::BigInt;
use num_traits::{FromPrimitive, Signed, ToPrimitive, Zero};

use super::exception::PyException;
use super::parse::Parser;
use super::value::{binop, float_pow, int_to_f64, num_cmp, py_lt, unary, BinOp, PyValue, UnaryOp};

/// Python's default recursion limit, used for nested lambda calls.
const MAX_CALL_DEPTH: usize = 1000;

/// Most evaluation steps one entry point ([`eval_expression`], [`Callable::call`]) may
/// spend: one per expression node evaluated, plus one per 16 items of every sequence an
/// operator builds. Past it the evaluation stops with [`budget_exceeded`] (this
/// evaluator's own error: CPython has no such limit and would run, possibly forever).
pub const STEP_BUDGET: u64 = 1_000_000;

thread_local! {
    /// Steps left to the evaluation running on this thread.
    static STEPS_LEFT: Cell<u64> = const { Cell::new(STEP_BUDGET) };
}

/// The error of an evaluation that ran out of steps.
pub fn budget_exceeded() -> PyException {
    exc(
        "RuntimeError",
        format!("evaluation step budget exceeded ({STEP_BUDGET} steps; limit of this evaluator, not of Python)"),
    )
}

/// Spends `n` steps of the running evaluation's budget.
fn spend(n: u64) -> Result<(), PyException> {
    STEPS_LEFT.with(|left| match left.get().checked_sub(n) {
        Some(rest) => {
            left.set(rest);
            Ok(())
        }
        None => {
            left.set(0);
            Err(budget_exceeded())
        }
    })
}

/// Gives the evaluation on this thread a fresh budget.
fn reset_budget() {
    STEPS_LEFT.with(|left| left.set(STEP_BUDGET));
}

/// Steps charged for building `v`: a sixteenth of its length if it is a sequence.
fn size_cost(v: &PyValue) -> u64 {
    let len = match v {
        PyValue::Str(s) => s.len(),
        PyValue::List(items) | PyValue::Tuple(items) => items.len(),
        _ => 0,
    };
    (len / 16) as u64
}

#[derive(Debug, Clone)]
enum Expr {
    Const(PyValue),
    Name(String),
    Unary(UnaryOp, Box<Expr>),
    Invert(Box<Expr>),
    Not(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Bit(char, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    IfElse(Box<Expr>, Box<Expr>, Box<Expr>),
    Call(Box<Expr>, Vec<Expr>),
    Attr(Box<Expr>, String),
    Subscript(Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
    Tuple(Vec<Expr>),
    Lambda(Rc<LambdaDef>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Debug)]
struct LambdaDef {
    params: Vec<String>,
    body: Expr,
}

/// A value produced by the evaluator: a plain Python value or something callable.
#[derive(Debug, Clone)]
pub enum Callable {
    /// A plain value (calling it is a TypeError, as in Python).
    Value(PyValue),
    /// A `lambda` with the variables it closed over.
    Lambda(Rc<Closure>),
    /// A builtin or `math` function, by name (`"abs"`, `"math.sin"`).
    Builtin(&'static str),
    /// The `math` module.
    MathModule,
}

/// A lambda together with its captured scope.
#[derive(Debug)]
pub struct Closure {
    def: Rc<LambdaDef>,
    scope: Vec<(String, Callable)>,
}

fn exc(kind: &str, msg: impl Into<String>) -> PyException {
    PyException::new(kind, msg)
}

fn syntax_error(message: &str, line: usize) -> PyException {
    exc("SyntaxError", format!("{message} (<string>, line {line})"))
}

/// Stack for running the evaluator: deep lambda recursion (up to Python's limit of 1000
/// calls) needs far more than a default thread stack in debug builds.
const EVAL_STACK_BYTES: usize = 256 << 20;

/// Runs `f` on a fresh thread with a large stack (the evaluator recurses; Python's own
/// recursion limit is what bounds it, not the caller's stack). Errors with `MemoryError`
/// if no thread can be started.
pub fn with_eval_stack<T: Send>(
    f: impl FnOnce() -> Result<T, PyException> + Send,
) -> Result<T, PyException> {
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("py-eval".to_string())
            .stack_size(EVAL_STACK_BYTES)
            .spawn_scoped(scope, f)
        {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(exc("SystemError", "evaluator thread panicked"))),
            Err(_) => Err(exc("MemoryError", "cannot start the evaluator thread")),
        }
    })
}

/// Python's `eval(src)` with the given local variables, for the expression subset in
/// the module docs. Leading and trailing spaces/tabs are stripped, as `eval` does.
pub fn eval_expression(src: &str, locals: &[(&str, PyValue)]) -> Result<Callable, PyException> {
    let trimmed = src.trim_matches(|c| c == ' ' || c == '\t');
    if trimmed.trim().is_empty() {
        return Err(syntax_error("invalid syntax", 0));
    }
    let mut p = Parser::new(trimmed);
    let expr = parse_lambda_or_test(&mut p, 0)?;
    p.skip_ws();
    if p.pos != p.src.len() {
        return Err(syntax_error("invalid syntax", 1));
    }
    let scope: Vec<(String, Callable)> = locals
        .iter()
        .map(|(k, v)| (k.to_string(), Callable::Value(v.clone())))
        .collect();
    reset_budget();
    eval(&expr, &scope, 0)
}

impl Callable {
    /// Calls the value with positional arguments, as Python would.
    pub fn call(&self, args: &[PyValue]) -> Result<PyValue, PyException> {
        let args: Vec<Callable> = args.iter().cloned().map(Callable::Value).collect();
        reset_budget();
        match call(self, &args, 0)? {
            Callable::Value(v) => Ok(v),
            other => Err(exc(
                "TypeError",
                format!(
                    "the function returned a {}, which this evaluator cannot use as a value",
                    other.type_name()
                ),
            )),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Callable::Value(v) => v.type_name(),
            Callable::Lambda(_) => "function",
            Callable::Builtin(_) => "builtin_function_or_method",
            Callable::MathModule => "module",
        }
    }
}

// ---------------------------------------------------------------------------------------
// parsing
// ---------------------------------------------------------------------------------------

fn deeper(depth: usize) -> Result<usize, PyException> {
    if depth > super::MAX_DEPTH {
        Err(exc("MemoryError", "expression nested too deeply"))
    } else {
        Ok(depth + 1)
    }
}

fn invalid() -> PyException {
    syntax_error("invalid syntax", 1)
}

/// True when the identifier at the cursor is exactly `word` (not a prefix of a name).
fn at_word(p: &Parser, word: &str) -> bool {
    let rest = p.rest();
    rest.starts_with(word)
        && !rest[word.len()..]
            .chars()
            .next()
            .is_some_and(|c| c == '_' || c.is_alphanumeric())
}

fn parse_lambda_or_test(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    let depth = deeper(depth)?;
    p.skip_ws();
    if at_word(p, "lambda") {
        p.eat("lambda");
        let mut params = Vec::new();
        loop {
            p.skip_ws();
            if p.eat(":") {
                break;
            }
            let name = p.ident().ok_or_else(invalid)?;
            if super::parse::is_keyword(&name) {
                return Err(invalid());
            }
            if params.contains(&name) {
                return Err(syntax_error(
                    &format!("duplicate argument '{name}' in function definition"),
                    1,
                ));
            }
            params.push(name);
            p.skip_ws();
            if p.eat(",") {
                continue;
            }
            p.skip_ws();
            if p.eat(":") {
                break;
            }
            return Err(invalid());
        }
        let body = parse_lambda_or_test(p, depth)?;
        return Ok(Expr::Lambda(Rc::new(LambdaDef { params, body })));
    }
    let value = parse_or(p, depth)?;
    p.skip_ws();
    if at_word(p, "if") {
        p.eat("if");
        let cond = parse_or(p, depth)?;
        p.skip_ws();
        if !at_word(p, "else") {
            return Err(syntax_error("expected 'else' after 'if' expression", 1));
        }
        p.eat("else");
        let other = parse_lambda_or_test(p, depth)?;
        return Ok(Expr::IfElse(
            Box::new(cond),
            Box::new(value),
            Box::new(other),
        ));
    }
    Ok(value)
}

fn parse_or(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    let mut acc = parse_and(p, depth)?;
    loop {
        p.skip_ws();
        if at_word(p, "or") {
            p.eat("or");
            let rhs = parse_and(p, depth)?;
            acc = Expr::Or(Box::new(acc), Box::new(rhs));
        } else {
            return Ok(acc);
        }
    }
}

fn parse_and(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    let mut acc = parse_not(p, depth)?;
    loop {
        p.skip_ws();
        if at_word(p, "and") {
            p.eat("and");
            let rhs = parse_not(p, depth)?;
            acc = Expr::And(Box::new(acc), Box::new(rhs));
        } else {
            return Ok(acc);
        }
    }
}

fn parse_not(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    p.skip_ws();
    if at_word(p, "not") {
        p.eat("not");
        let depth = deeper(depth)?;
        return Ok(Expr::Not(Box::new(parse_not(p, depth)?)));
    }
    parse_comparison(p, depth)
}

fn parse_comparison(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    let first = parse_bit(p, depth, 0)?;
    let mut rest = Vec::new();
    loop {
        p.skip_ws();
        let op = if p.eat("<=") {
            CmpOp::Le
        } else if p.eat(">=") {
            CmpOp::Ge
        } else if p.eat("==") {
            CmpOp::Eq
        } else if p.eat("!=") {
            CmpOp::Ne
        } else if p.rest().starts_with("<<") || p.rest().starts_with(">>") {
            return Err(invalid());
        } else if p.eat("<") {
            CmpOp::Lt
        } else if p.eat(">") {
            CmpOp::Gt
        } else {
            break;
        };
        rest.push((op, parse_bit(p, depth, 0)?));
    }
    if rest.is_empty() {
        Ok(first)
    } else {
        Ok(Expr::Compare(Box::new(first), rest))
    }
}

/// `|` (level 0), `^` (level 1), `&` (level 2), then arithmetic.
fn parse_bit(p: &mut Parser, depth: usize, level: usize) -> Result<Expr, PyException> {
    if level == 3 {
        return parse_arith(p, depth);
    }
    let sym = ['|', '^', '&'][level];
    let mut acc = parse_bit(p, depth, level + 1)?;
    loop {
        p.skip_ws();
        if p.peek() == Some(sym) && p.peek_at(1) != Some('=') {
            p.bump();
            let rhs = parse_bit(p, depth, level + 1)?;
            acc = Expr::Bit(sym, Box::new(acc), Box::new(rhs));
        } else {
            return Ok(acc);
        }
    }
}

fn parse_arith(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    let mut acc = parse_term(p, depth)?;
    loop {
        p.skip_ws();
        let op = match p.peek() {
            Some('+') if p.peek_at(1) != Some('=') => BinOp::Add,
            Some('-') if p.peek_at(1) != Some('=') && p.peek_at(1) != Some('>') => BinOp::Sub,
            _ => return Ok(acc),
        };
        p.bump();
        let rhs = parse_term(p, depth)?;
        acc = Expr::Bin(op, Box::new(acc), Box::new(rhs));
    }
}

fn parse_term(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    let mut acc = parse_factor(p, depth)?;
    loop {
        p.skip_ws();
        let op = if p.rest().starts_with("**") {
            return Ok(acc);
        } else if p.eat("//") {
            BinOp::FloorDiv
        } else if p.rest().starts_with("*=") || p.rest().starts_with("/=") {
            return Err(invalid());
        } else if p.eat("*") {
            BinOp::Mul
        } else if p.eat("/") {
            BinOp::Div
        } else if p.eat("%") {
            BinOp::Mod
        } else {
            return Ok(acc);
        };
        let rhs = parse_factor(p, depth)?;
        acc = Expr::Bin(op, Box::new(acc), Box::new(rhs));
    }
}

fn parse_factor(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    p.skip_ws();
    let depth = deeper(depth)?;
    if p.eat("-") {
        return Ok(Expr::Unary(UnaryOp::Neg, Box::new(parse_factor(p, depth)?)));
    }
    if p.eat("+") {
        return Ok(Expr::Unary(UnaryOp::Pos, Box::new(parse_factor(p, depth)?)));
    }
    if p.eat("~") {
        return Ok(Expr::Invert(Box::new(parse_factor(p, depth)?)));
    }
    let base = parse_primary(p, depth)?;
    p.skip_ws();
    if p.eat("**") {
        let exp = parse_factor(p, depth)?;
        return Ok(Expr::Bin(BinOp::Pow, Box::new(base), Box::new(exp)));
    }
    Ok(base)
}

fn parse_primary(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    let mut acc = parse_atom(p, depth)?;
    loop {
        p.skip_ws();
        if p.eat("(") {
            let args = parse_items(p, depth, ')')?;
            acc = Expr::Call(Box::new(acc), args);
        } else if p.peek() == Some('.') && !matches!(p.peek_at(1), Some('0'..='9')) {
            p.bump();
            p.skip_ws();
            let name = p.ident().ok_or_else(invalid)?;
            acc = Expr::Attr(Box::new(acc), name);
        } else if p.eat("[") {
            let index = parse_lambda_or_test(p, depth)?;
            p.skip_ws();
            if !p.eat("]") {
                return Err(invalid());
            }
            acc = Expr::Subscript(Box::new(acc), Box::new(index));
        } else {
            return Ok(acc);
        }
    }
}

/// Comma-separated expressions up to `close` (already past the opening bracket).
fn parse_items(p: &mut Parser, depth: usize, close: char) -> Result<Vec<Expr>, PyException> {
    let mut items = Vec::new();
    loop {
        p.skip_ws();
        if p.peek() == Some(close) {
            p.bump();
            return Ok(items);
        }
        items.push(parse_lambda_or_test(p, depth)?);
        p.skip_ws();
        if p.eat(",") {
            continue;
        }
        if p.peek() == Some(close) {
            p.bump();
            return Ok(items);
        }
        if p.peek().is_none() {
            return Err(syntax_error(
                &format!(
                    "'{}' was never closed",
                    match close {
                        ')' => '(',
                        ']' => '[',
                        _ => '{',
                    }
                ),
                1,
            ));
        }
        return Err(invalid());
    }
}

fn parse_atom(p: &mut Parser, depth: usize) -> Result<Expr, PyException> {
    p.skip_ws();
    match p.peek() {
        None => Err(invalid()),
        Some('(') => {
            p.bump();
            p.skip_ws();
            if p.eat(")") {
                return Ok(Expr::Tuple(Vec::new()));
            }
            let first = parse_lambda_or_test(p, depth)?;
            p.skip_ws();
            if p.eat(")") {
                return Ok(first);
            }
            if !p.eat(",") {
                return Err(if p.peek().is_none() {
                    syntax_error("'(' was never closed", 1)
                } else {
                    invalid()
                });
            }
            let mut items = vec![first];
            items.extend(parse_items(p, depth, ')')?);
            Ok(Expr::Tuple(items))
        }
        Some('[') => {
            p.bump();
            Ok(Expr::List(parse_items(p, depth, ']')?))
        }
        Some('0'..='9') => number(p),
        Some('.') if matches!(p.peek_at(1), Some('0'..='9')) => number(p),
        Some('\'' | '"') => string(p),
        Some(c) if c == '_' || c.is_alphabetic() => {
            let save = p.pos;
            let word = p.ident().unwrap_or_default();
            if matches!(p.peek(), Some('\'' | '"'))
                && matches!(word.to_ascii_lowercase().as_str(), "r" | "u")
            {
                p.pos = save;
                return string(p);
            }
            match word.as_str() {
                "True" => Ok(Expr::Const(PyValue::Bool(true))),
                "False" => Ok(Expr::Const(PyValue::Bool(false))),
                "None" => Ok(Expr::Const(PyValue::None)),
                w if super::parse::is_keyword(w) => Err(invalid()),
                _ => Ok(Expr::Name(word)),
            }
        }
        Some(_) => Err(invalid()),
    }
}

fn number(p: &mut Parser) -> Result<Expr, PyException> {
    p.number().map(Expr::Const).map_err(|e| {
        if e.message.contains("decimal literal") {
            syntax_error("invalid decimal literal", 1)
        } else if e.message.contains("leading zeros") {
            syntax_error(
                "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers",
                1,
            )
        } else {
            invalid()
        }
    })
}

fn string(p: &mut Parser) -> Result<Expr, PyException> {
    p.strings().map(Expr::Const).map_err(|e| {
        if e.message.contains("unterminated") {
            syntax_error("unterminated string literal (detected at line 1)", 1)
        } else {
            invalid()
        }
    })
}

// ---------------------------------------------------------------------------------------
// evaluation
// ---------------------------------------------------------------------------------------

fn lookup(name: &str, scope: &[(String, Callable)]) -> Result<Callable, PyException> {
    if let Some((_, v)) = scope.iter().rev().find(|(k, _)| k == name) {
        return Ok(v.clone());
    }
    match name {
        "math" => Ok(Callable::MathModule),
        "abs" => Ok(Callable::Builtin("abs")),
        "float" => Ok(Callable::Builtin("float")),
        "int" => Ok(Callable::Builtin("int")),
        "round" => Ok(Callable::Builtin("round")),
        "pow" => Ok(Callable::Builtin("pow")),
        "min" => Ok(Callable::Builtin("min")),
        "max" => Ok(Callable::Builtin("max")),
        _ => Err(exc("NameError", format!("name '{name}' is not defined"))),
    }
}

fn value(c: Callable) -> Result<PyValue, PyException> {
    match c {
        Callable::Value(v) => Ok(v),
        other => Err(exc(
            "TypeError",
            format!(
                "unsupported operand type: '{}' (this evaluator only computes with numbers, strings and sequences)",
                other.type_name()
            ),
        )),
    }
}

fn eval(expr: &Expr, scope: &[(String, Callable)], depth: usize) -> Result<Callable, PyException> {
    spend(1)?;
    let v = |e: &Expr| -> Result<PyValue, PyException> { value(eval(e, scope, depth)?) };
    Ok(match expr {
        Expr::Const(c) => Callable::Value(c.clone()),
        Expr::Name(n) => lookup(n, scope)?,
        Expr::Unary(op, e) => Callable::Value(unary(*op, &v(e)?)?),
        Expr::Invert(e) => {
            let x = v(e)?;
            match x.as_bigint() {
                Some(n) => Callable::Value(PyValue::Int(-n - 1)),
                None => {
                    return Err(exc(
                        "TypeError",
                        format!("bad operand type for unary ~: '{}'", x.type_name()),
                    ))
                }
            }
        }
        Expr::Not(e) => Callable::Value(PyValue::Bool(!truthy(&eval(e, scope, depth)?))),
        Expr::Bin(op, a, b) => {
            let x = v(a)?;
            let y = v(b)?;
            let out = binop(*op, &x, &y)?;
            spend(size_cost(&out))?;
            Callable::Value(out)
        }
        Expr::Bit(sym, a, b) => {
            let x = v(a)?;
            let y = v(b)?;
            Callable::Value(bitop(*sym, &x, &y)?)
        }
        Expr::And(a, b) => {
            let x = eval(a, scope, depth)?;
            if truthy(&x) {
                eval(b, scope, depth)?
            } else {
                x
            }
        }
        Expr::Or(a, b) => {
            let x = eval(a, scope, depth)?;
            if truthy(&x) {
                x
            } else {
                eval(b, scope, depth)?
            }
        }
        Expr::Compare(first, rest) => {
            let mut left = v(first)?;
            for (op, e) in rest {
                let right = v(e)?;
                if !compare(*op, &left, &right)? {
                    return Ok(Callable::Value(PyValue::Bool(false)));
                }
                left = right;
            }
            Callable::Value(PyValue::Bool(true))
        }
        Expr::IfElse(cond, a, b) => {
            if truthy(&eval(cond, scope, depth)?) {
                eval(a, scope, depth)?
            } else {
                eval(b, scope, depth)?
            }
        }
        Expr::Call(f, args) => {
            let func = eval(f, scope, depth)?;
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(a, scope, depth)?);
            }
            call(&func, &vals, depth)?
        }
        Expr::Attr(obj, name) => {
            let o = eval(obj, scope, depth)?;
            attr(&o, name)?
        }
        Expr::Subscript(obj, index) => {
            let o = v(obj)?;
            let i = v(index)?;
            Callable::Value(super::builtins::getitem(&o, &i)?)
        }
        Expr::List(items) => Callable::Value(PyValue::List(
            items.iter().map(v).collect::<Result<_, _>>()?,
        )),
        Expr::Tuple(items) => Callable::Value(PyValue::Tuple(
            items.iter().map(v).collect::<Result<_, _>>()?,
        )),
        Expr::Lambda(def) => Callable::Lambda(Rc::new(Closure {
            def: def.clone(),
            scope: scope.to_vec(),
        })),
    })
}

fn truthy(c: &Callable) -> bool {
    match c {
        Callable::Value(v) => v.truthy(),
        _ => true,
    }
}

fn compare(op: CmpOp, a: &PyValue, b: &PyValue) -> Result<bool, PyException> {
    let sym = match op {
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
        CmpOp::Eq => return Ok(a.py_eq(b)),
        CmpOp::Ne => return Ok(!a.py_eq(b)),
    };
    let relabel = |e: PyException| {
        if e.kind == "TypeError" {
            exc(
                "TypeError",
                format!(
                    "'{sym}' not supported between instances of '{}' and '{}'",
                    a.type_name(),
                    b.type_name()
                ),
            )
        } else {
            e
        }
    };
    if a.is_number() && b.is_number() {
        let ord = num_cmp(a, b);
        return Ok(match (op, ord) {
            (_, None) => false,
            (CmpOp::Lt, Some(o)) => o.is_lt(),
            (CmpOp::Le, Some(o)) => o.is_le(),
            (CmpOp::Gt, Some(o)) => o.is_gt(),
            _ => ord.is_some_and(|o| o.is_ge()),
        });
    }
    match op {
        CmpOp::Lt => py_lt(a, b).map_err(relabel),
        CmpOp::Gt => py_lt(b, a).map_err(relabel),
        CmpOp::Le => Ok(py_lt(a, b).map_err(relabel)? || a.py_eq(b)),
        _ => Ok(py_lt(b, a).map_err(relabel)? || a.py_eq(b)),
    }
}

fn bitop(sym: char, a: &PyValue, b: &PyValue) -> Result<PyValue, PyException> {
    match (a, b) {
        (PyValue::Bool(x), PyValue::Bool(y)) => Ok(PyValue::Bool(match sym {
            '|' => x | y,
            '^' => x ^ y,
            _ => x & y,
        })),
        _ => match (a.as_bigint(), b.as_bigint()) {
            (Some(x), Some(y)) => Ok(PyValue::Int(match sym {
                '|' => x | y,
                '^' => x ^ y,
                _ => x & y,
            })),
            _ => Err(exc(
                "TypeError",
                format!(
                    "unsupported operand type(s) for {sym}: '{}' and '{}'",
                    a.type_name(),
                    b.type_name()
                ),
            )),
        },
    }
}

const MATH_FUNCS: &[&str] = &[
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "exp",
    "log",
    "log10",
    "log2",
    "sqrt",
    "pow",
    "fabs",
    "floor",
    "ceil",
    "factorial",
    "hypot",
];

fn attr(o: &Callable, name: &str) -> Result<Callable, PyException> {
    match o {
        Callable::MathModule => match name {
            "pi" => Ok(Callable::Value(PyValue::Float(std::f64::consts::PI))),
            "e" => Ok(Callable::Value(PyValue::Float(std::f64::consts::E))),
            "tau" => Ok(Callable::Value(PyValue::Float(std::f64::consts::TAU))),
            "inf" => Ok(Callable::Value(PyValue::Float(f64::INFINITY))),
            "nan" => Ok(Callable::Value(PyValue::Float(f64::NAN))),
            _ => match MATH_FUNCS.iter().find(|f| **f == name) {
                Some(f) => Ok(Callable::Builtin(math_name(f))),
                None => Err(exc(
                    "AttributeError",
                    format!("module 'math' has no attribute '{name}'"),
                )),
            },
        },
        other => Err(exc(
            "AttributeError",
            format!("'{}' object has no attribute '{name}'", other.type_name()),
        )),
    }
}

fn math_name(f: &str) -> &'static str {
    match f {
        "sin" => "math.sin",
        "cos" => "math.cos",
        "tan" => "math.tan",
        "asin" => "math.asin",
        "acos" => "math.acos",
        "atan" => "math.atan",
        "atan2" => "math.atan2",
        "sinh" => "math.sinh",
        "cosh" => "math.cosh",
        "tanh" => "math.tanh",
        "exp" => "math.exp",
        "log" => "math.log",
        "log10" => "math.log10",
        "log2" => "math.log2",
        "sqrt" => "math.sqrt",
        "pow" => "math.pow",
        "fabs" => "math.fabs",
        "floor" => "math.floor",
        "ceil" => "math.ceil",
        "factorial" => "math.factorial",
        _ => "math.hypot",
    }
}

fn call(f: &Callable, args: &[Callable], depth: usize) -> Result<Callable, PyException> {
    match f {
        Callable::Value(v) => Err(exc(
            "TypeError",
            format!("'{}' object is not callable", v.type_name()),
        )),
        Callable::MathModule => Err(exc("TypeError", "'module' object is not callable")),
        Callable::Lambda(cl) => {
            if depth >= MAX_CALL_DEPTH {
                return Err(exc("RecursionError", "maximum recursion depth exceeded"));
            }
            let params = &cl.def.params;
            if args.len() > params.len() {
                let n = params.len();
                return Err(exc(
                    "TypeError",
                    format!(
                        "<lambda>() takes {n} positional argument{} but {} {} given",
                        if n == 1 { "" } else { "s" },
                        args.len(),
                        if args.len() == 1 { "was" } else { "were" }
                    ),
                ));
            }
            if args.len() < params.len() {
                let missing: Vec<&str> = params[args.len()..].iter().map(|s| s.as_str()).collect();
                return Err(exc(
                    "TypeError",
                    format!("<lambda>() {}", super::bind::missing_text(&missing)),
                ));
            }
            let mut scope = cl.scope.clone();
            for (p, a) in params.iter().zip(args) {
                scope.push((p.clone(), a.clone()));
            }
            eval(&cl.def.body, &scope, depth + 1)
        }
        Callable::Builtin(name) => {
            let vals: Vec<PyValue> = args.iter().cloned().map(value).collect::<Result<_, _>>()?;
            builtin(name, &vals).map(Callable::Value)
        }
    }
}

fn arity(name: &str, args: &[PyValue], n: usize) -> Result<(), PyException> {
    if args.len() == n {
        return Ok(());
    }
    let short = name.trim_start_matches("math.");
    Err(exc(
        "TypeError",
        if n == 1 {
            format!(
                "{short}() takes exactly one argument ({} given)",
                args.len()
            )
        } else {
            format!("{short} expected {n} arguments, got {}", args.len())
        },
    ))
}

fn as_float(name: &str, v: &PyValue) -> Result<f64, PyException> {
    match v {
        PyValue::Float(x) => Ok(*x),
        PyValue::Int(n) => int_to_f64(n),
        PyValue::Bool(b) => Ok(f64::from(u8::from(*b))),
        other => Err(exc(
            "TypeError",
            if name == "float" {
                format!(
                    "float() argument must be a string or a real number, not '{}'",
                    other.type_name()
                )
            } else {
                format!("must be real number, not {}", other.type_name())
            },
        )),
    }
}

fn domain() -> PyException {
    exc("ValueError", "math domain error")
}

fn checked(x: f64, input_finite: bool) -> Result<PyValue, PyException> {
    if x.is_nan() && input_finite {
        Err(domain())
    } else if x.is_infinite() && input_finite {
        Err(exc("OverflowError", "math range error"))
    } else {
        Ok(PyValue::Float(x))
    }
}

fn float_to_int(x: f64) -> Result<PyValue, PyException> {
    if x.is_nan() {
        return Err(exc("ValueError", "cannot convert float NaN to integer"));
    }
    if x.is_infinite() {
        return Err(exc(
            "OverflowError",
            "cannot convert float infinity to integer",
        ));
    }
    Ok(PyValue::Int(BigInt::from_f64(x).unwrap_or_default()))
}

fn builtin(name: &str, args: &[PyValue]) -> Result<PyValue, PyException> {
    let unary_math = |f: fn(f64) -> f64| -> Result<PyValue, PyException> {
        arity(name, args, 1)?;
        let x = as_float(name, &args[0])?;
        checked(f(x), x.is_finite())
    };
    match name {
        "abs" => {
            arity(name, args, 1)?;
            match &args[0] {
                PyValue::Float(x) => Ok(PyValue::Float(x.abs())),
                PyValue::Int(n) => Ok(PyValue::Int(n.abs())),
                PyValue::Bool(b) => Ok(PyValue::int(i64::from(*b))),
                other => Err(exc(
                    "TypeError",
                    format!("bad operand type for abs(): '{}'", other.type_name()),
                )),
            }
        }
        "float" => {
            arity(name, args, 1)?;
            as_float(name, &args[0]).map(PyValue::Float)
        }
        "int" => {
            arity(name, args, 1)?;
            match &args[0] {
                PyValue::Float(x) => float_to_int(x.trunc()),
                PyValue::Int(n) => Ok(PyValue::Int(n.clone())),
                PyValue::Bool(b) => Ok(PyValue::int(i64::from(*b))),
                other => Err(exc(
                    "TypeError",
                    format!(
                        "int() argument must be a string, a bytes-like object or a real number, not '{}'",
                        other.type_name()
                    ),
                )),
            }
        }
        "round" => {
            arity(name, args, 1)?;
            match &args[0] {
                PyValue::Float(x) => float_to_int(x.round_ties_even()),
                v if v.is_number() => Ok(PyValue::Int(v.as_bigint().unwrap_or_default())),
                other => Err(exc(
                    "TypeError",
                    format!("type {} doesn't define __round__ method", other.type_name()),
                )),
            }
        }
        "pow" => {
            if args.len() != 2 {
                return Err(exc(
                    "TypeError",
                    format!("pow expected 2 arguments, got {}", args.len()),
                ));
            }
            binop(BinOp::Pow, &args[0], &args[1])
        }
        "min" | "max" => {
            let items: Vec<PyValue> = if args.len() == 1 {
                super::builtins::py_iter(&args[0])?
            } else {
                args.to_vec()
            };
            let mut best = items
                .first()
                .cloned()
                .ok_or_else(|| exc("ValueError", format!("{name}() arg is an empty sequence")))?;
            for it in &items[1..] {
                let better = if name == "min" {
                    py_lt(it, &best)?
                } else {
                    py_lt(&best, it)?
                };
                if better {
                    best = it.clone();
                }
            }
            Ok(best)
        }
        "math.sin" => unary_math(f64::sin),
        "math.cos" => unary_math(f64::cos),
        "math.tan" => unary_math(f64::tan),
        "math.asin" => unary_math(f64::asin),
        "math.acos" => unary_math(f64::acos),
        "math.atan" => unary_math(f64::atan),
        "math.sinh" => unary_math(f64::sinh),
        "math.cosh" => unary_math(f64::cosh),
        "math.tanh" => unary_math(f64::tanh),
        "math.exp" => unary_math(f64::exp),
        "math.fabs" => unary_math(f64::abs),
        "math.sqrt" => unary_math(f64::sqrt),
        "math.log10" | "math.log2" => {
            arity(name, args, 1)?;
            let x = as_float(name, &args[0])?;
            if x <= 0.0 {
                return Err(domain());
            }
            Ok(PyValue::Float(if name == "math.log10" {
                x.log10()
            } else {
                x.log2()
            }))
        }
        "math.log" => {
            if args.is_empty() || args.len() > 2 {
                return Err(exc(
                    "TypeError",
                    format!("log expected 1 or 2 arguments, got {}", args.len()),
                ));
            }
            let ln = |v: &PyValue| -> Result<f64, PyException> {
                let x = as_float(name, v)?;
                if x <= 0.0 {
                    Err(domain())
                } else {
                    Ok(x.ln())
                }
            };
            let num = ln(&args[0])?;
            if args.len() == 2 {
                let den = ln(&args[1])?;
                if den == 0.0 {
                    return Err(exc("ZeroDivisionError", "float division by zero"));
                }
                Ok(PyValue::Float(num / den))
            } else {
                Ok(PyValue::Float(num))
            }
        }
        "math.pow" => {
            arity(name, args, 2)?;
            let x = as_float(name, &args[0])?;
            let y = as_float(name, &args[1])?;
            match float_pow(x, y) {
                Err(e) if e.kind == "ZeroDivisionError" => Err(domain()),
                Err(e) if e.kind == "OverflowError" => {
                    Err(exc("OverflowError", "math range error"))
                }
                other => other.map(PyValue::Float),
            }
        }
        "math.atan2" | "math.hypot" => {
            arity(name, args, 2)?;
            let y = as_float(name, &args[0])?;
            let x = as_float(name, &args[1])?;
            Ok(PyValue::Float(if name == "math.atan2" {
                y.atan2(x)
            } else {
                y.hypot(x)
            }))
        }
        "math.floor" | "math.ceil" => {
            arity(name, args, 1)?;
            match &args[0] {
                PyValue::Float(x) => float_to_int(if name == "math.floor" {
                    x.floor()
                } else {
                    x.ceil()
                }),
                v if v.is_number() => Ok(PyValue::Int(v.as_bigint().unwrap_or_default())),
                other => Err(exc(
                    "TypeError",
                    format!("must be real number, not {}", other.type_name()),
                )),
            }
        }
        "math.factorial" => {
            arity(name, args, 1)?;
            let n = match &args[0] {
                PyValue::Int(_) | PyValue::Bool(_) => args[0].as_bigint().unwrap_or_default(),
                other => {
                    return Err(exc(
                        "TypeError",
                        format!(
                            "'{}' object cannot be interpreted as an integer",
                            other.type_name()
                        ),
                    ))
                }
            };
            if n.is_negative() {
                return Err(exc(
                    "ValueError",
                    "factorial() not defined for negative values",
                ));
            }
            let n = n
                .to_u64()
                .filter(|n| *n <= super::builtins::MAX_FACTORIAL)
                .ok_or_else(|| exc("MemoryError", "result too large"))?;
            let mut acc = BigInt::from(1u8);
            for i in 2..=n {
                acc *= i;
            }
            Ok(PyValue::Int(acc))
        }
        _ => Err(exc("NameError", format!("name '{name}' is not defined"))),
    }
}

/// Whether a value is zero (used by tests).
#[allow(dead_code)]
fn is_zero(v: &PyValue) -> bool {
    match v {
        PyValue::Int(n) => n.is_zero(),
        PyValue::Float(x) => *x == 0.0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mirrors `f = eval(s); h = 1e-10; (f(x + h) - f(x)) / h` with x = 5.
    fn deriv(s: &str) -> String {
        let x = PyValue::int(5);
        let run = || -> Result<PyValue, PyException> {
            with_eval_stack(|| {
                let f = eval_expression(s, &[("function", PyValue::str(s)), ("x", x.clone())])?;
                let h = PyValue::Float(1e-10);
                let xh = binop(BinOp::Add, &x, &h)?;
                let a = f.call(&[xh])?;
                let b = f.call(std::slice::from_ref(&x))?;
                binop(BinOp::Div, &binop(BinOp::Sub, &a, &b)?, &h)
            })
        };
        match run() {
            Ok(v) => v.repr(),
            Err(e) => format!("{} | {}", e.kind, e.message),
        }
    }

    #[test]
    fn matches_cpython_eval() {
        // Each expectation is python3 running the mirror above on the same string.
        assert_eq!(deriv("lambda x: 3*x**2 + 2*x + 1"), "32.00000264769187");
        assert_eq!(deriv(""), "SyntaxError | invalid syntax (<string>, line 0)");
        assert_eq!(deriv("   lambda x: x"), "1.000000082740371");
        assert_eq!(
            deriv("lambda x: x +"),
            "SyntaxError | invalid syntax (<string>, line 1)"
        );
        assert_eq!(
            deriv("4x^3"),
            "SyntaxError | invalid decimal literal (<string>, line 1)"
        );
        assert_eq!(
            deriv("(t) => 3*t"),
            "SyntaxError | invalid syntax (<string>, line 1)"
        );
        assert_eq!(
            deriv("lambda x: x^2"),
            "TypeError | unsupported operand type(s) for ^: 'float' and 'int'"
        );
        assert_eq!(
            deriv("'abc"),
            "SyntaxError | unterminated string literal (detected at line 1) (<string>, line 1)"
        );
        assert_eq!(
            deriv("lambda x, y: x"),
            "TypeError | <lambda>() missing 1 required positional argument: 'y'"
        );
        assert_eq!(
            deriv("lambda: 1"),
            "TypeError | <lambda>() takes 0 positional arguments but 1 was given"
        );
        assert_eq!(
            deriv("x.foo"),
            "AttributeError | 'int' object has no attribute 'foo'"
        );
        assert_eq!(
            deriv("math.foo"),
            "AttributeError | module 'math' has no attribute 'foo'"
        );
        assert_eq!(
            deriv("lambda x: math.log(-x)"),
            "ValueError | math domain error"
        );
        assert_eq!(
            deriv("lambda x: math.sqrt(-x)"),
            "ValueError | math domain error"
        );
        assert_eq!(deriv("lambda x: [x][0]"), "1.000000082740371");
        assert_eq!(
            deriv("lambda x: math.exp(1000)"),
            "OverflowError | math range error"
        );
        assert_eq!(deriv("lambda x: x if x>0 else -x"), "1.000000082740371");
        assert_eq!(
            deriv("lambda x: undefined_thing*x"),
            "NameError | name 'undefined_thing' is not defined"
        );
        assert_eq!(
            deriv("function"),
            "TypeError | 'str' object is not callable"
        );
        assert_eq!(
            deriv("lambda x: (lambda f: f(f))(lambda f: f(f))"),
            "RecursionError | maximum recursion depth exceeded"
        );
        assert_eq!(deriv("5"), "TypeError | 'int' object is not callable");
        assert_eq!(deriv("6*x+2"), "TypeError | 'int' object is not callable");
        assert_eq!(deriv("square"), "NameError | name 'square' is not defined");
        assert_eq!(
            deriv("lambda x: math.factorial(x)"),
            "TypeError | 'float' object cannot be interpreted as an integer"
        );
        assert_eq!(deriv("abs"), "1.000000082740371");
        // python3: f=eval('lambda t: math.sin(t)**2 + math.e'); ... -> -0.5440226047426222
        assert_eq!(
            deriv("lambda t: math.sin(t)**2 + math.e"),
            "-0.5440226047426222"
        );
    }
}
