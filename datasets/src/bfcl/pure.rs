//! The 31 pure BFCL functions used by `exec_simple`/`exec_multiple`, plus
//! `get_fibonacci_number`, written to follow the Python originals statement by
//! statement (`../shared/spec/bfcl-functions.md`): same operations in the same order on
//! Python values, so results are bit-identical to CPython and wrong-typed arguments
//! fail with the exception CPython would raise at the same point (`'int' object is not
//! subscriptable`, `list indices must be integers or slices, not float`, ...).
//!
//! The helpers at the top are the Python builtins those bodies use (`len`, `iter`,
//! `sum`, subscripting, `range` bounds, comparisons, `sorted`, `int(s, 2)`, `bin`).
//!
//! Resource guards: where Python would run for minutes or exhaust memory on a hostile
//! argument (factorial of 10**9, trial division of a huge prime, a 10**9-long Fibonacci
//! list), these functions stop early with `MemoryError("result too large")` or
//! `TimeoutError("execution took too long")` instead.

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

use super::exec::{BoundArgs, PyException};
use super::lambda::{eval_expression, with_eval_stack};
use super::pyvalue::{binop, num_cmp, py_lt, unary, BinOp, PyValue, UnaryOp};

/// Largest `n` for which the factorial loops run (`n!` has ~250k bits).
pub const MAX_FACTORIAL: u64 = 20_000;
/// Longest Fibonacci list / largest Fibonacci index computed.
pub const MAX_FIBONACCI: u64 = 20_000;
/// Most loop iterations a single call may spend (trial division).
pub const MAX_STEPS: u64 = 50_000_000;
/// Most years `calculate_investment_value` simulates.
pub const MAX_YEARS: u64 = 10_000_000;
/// CPython's default recursion limit (for the recursive `math_gcd`).
const RECURSION_LIMIT: usize = 1000;

type R = Result<PyValue, PyException>;

fn exc(kind: &str, msg: impl Into<String>) -> PyException {
    PyException::new(kind, msg)
}

fn too_large() -> PyException {
    exc("MemoryError", "result too large")
}

fn too_long() -> PyException {
    exc("TimeoutError", "execution took too long")
}

// ---------------------------------------------------------------------------------------
// Python builtins over PyValue
// ---------------------------------------------------------------------------------------

fn add(a: &PyValue, b: &PyValue) -> R {
    binop(BinOp::Add, a, b)
}
fn sub(a: &PyValue, b: &PyValue) -> R {
    binop(BinOp::Sub, a, b)
}
fn mul(a: &PyValue, b: &PyValue) -> R {
    binop(BinOp::Mul, a, b)
}
fn div(a: &PyValue, b: &PyValue) -> R {
    binop(BinOp::Div, a, b)
}
fn pow(a: &PyValue, b: &PyValue) -> R {
    binop(BinOp::Pow, a, b)
}
fn modulo(a: &PyValue, b: &PyValue) -> R {
    binop(BinOp::Mod, a, b)
}
fn int(n: i64) -> PyValue {
    PyValue::int(n)
}
fn float(x: f64) -> PyValue {
    PyValue::Float(x)
}

/// Python's `len(v)`.
pub fn py_len(v: &PyValue) -> Result<usize, PyException> {
    match v {
        PyValue::Str(s) => Ok(s.chars().count()),
        PyValue::List(items) | PyValue::Tuple(items) => Ok(items.len()),
        PyValue::Dict(d) => Ok(d.len()),
        other => Err(exc(
            "TypeError",
            format!("object of type '{}' has no len()", other.type_name()),
        )),
    }
}

/// The items `for x in v` visits (dict keys, string characters).
pub fn py_iter(v: &PyValue) -> Result<Vec<PyValue>, PyException> {
    match v {
        PyValue::Str(s) => Ok(s.chars().map(|c| PyValue::Str(c.to_string())).collect()),
        PyValue::List(items) | PyValue::Tuple(items) => Ok(items.clone()),
        PyValue::Dict(d) => Ok(d.iter().map(|(k, _)| k.clone()).collect()),
        other => Err(exc(
            "TypeError",
            format!("'{}' object is not iterable", other.type_name()),
        )),
    }
}

/// Python's `sum(items)`: left to right from int 0.
fn py_sum<I: IntoIterator<Item = R>>(items: I) -> R {
    let mut acc = int(0);
    for it in items {
        acc = add(&acc, &it?)?;
    }
    Ok(acc)
}

/// `operator.index(v)`: ints (and bools) only, as `range()` and indexing require.
fn as_index(v: &PyValue) -> Result<BigInt, PyException> {
    v.as_bigint().ok_or_else(|| {
        exc(
            "TypeError",
            format!(
                "'{}' object cannot be interpreted as an integer",
                v.type_name()
            ),
        )
    })
}

/// Python's `container[index]` for lists, tuples, strings and dicts.
pub fn getitem(container: &PyValue, index: &PyValue) -> R {
    let seq_index = |len: usize, what: &str| -> Result<usize, PyException> {
        let i = index.as_bigint().ok_or_else(|| {
            exc(
                "TypeError",
                if what == "string" {
                    format!("string indices must be integers, not '{}'", index.type_name())
                } else {
                    format!(
                        "{what} indices must be integers or slices, not {}",
                        index.type_name()
                    )
                },
            )
        })?;
        let len_b = BigInt::from(len);
        let j = if i.is_negative() { &i + &len_b } else { i };
        if j.is_negative() || j >= len_b {
            return Err(exc("IndexError", format!("{what} index out of range")));
        }
        Ok(j.to_usize().unwrap_or(0))
    };
    match container {
        PyValue::List(items) => Ok(items[seq_index(items.len(), "list")?].clone()),
        PyValue::Tuple(items) => Ok(items[seq_index(items.len(), "tuple")?].clone()),
        PyValue::Str(s) => {
            let chars: Vec<char> = s.chars().collect();
            let i = seq_index(chars.len(), "string")?;
            Ok(PyValue::Str(chars[i].to_string()))
        }
        PyValue::Dict(d) => {
            if matches!(index, PyValue::List(_) | PyValue::Dict(_)) {
                return Err(exc(
                    "TypeError",
                    format!("unhashable type: '{}'", index.type_name()),
                ));
            }
            d.iter()
                .find(|(k, _)| k.py_eq(index))
                .map(|(_, v)| v.clone())
                .ok_or_else(|| exc("KeyError", index.repr()))
        }
        other => Err(exc(
            "TypeError",
            format!("'{}' object is not subscriptable", other.type_name()),
        )),
    }
}

/// `container[i]` with a small integer index.
fn idx(container: &PyValue, i: i64) -> R {
    getitem(container, &int(i))
}

/// Python's rich comparison `a <op> b` for `<`, `<=`, `>`, `>=`, `==`, `!=`.
pub fn compare(op: &str, a: &PyValue, b: &PyValue) -> Result<bool, PyException> {
    if op == "==" {
        return Ok(a.py_eq(b));
    }
    if op == "!=" {
        return Ok(!a.py_eq(b));
    }
    if a.is_number() && b.is_number() {
        let o = num_cmp(a, b);
        return Ok(match op {
            "<" => o.is_some_and(|o| o.is_lt()),
            "<=" => o.is_some_and(|o| o.is_le()),
            ">" => o.is_some_and(|o| o.is_gt()),
            _ => o.is_some_and(|o| o.is_ge()),
        });
    }
    let relabel = |e: PyException| {
        if e.kind == "TypeError" {
            exc(
                "TypeError",
                format!(
                    "'{op}' not supported between instances of '{}' and '{}'",
                    a.type_name(),
                    b.type_name()
                ),
            )
        } else {
            e
        }
    };
    match op {
        "<" => py_lt(a, b).map_err(relabel),
        ">" => py_lt(b, a).map_err(relabel),
        "<=" => Ok(py_lt(a, b).map_err(relabel)? || a.py_eq(b)),
        _ => Ok(py_lt(b, a).map_err(relabel)? || a.py_eq(b)),
    }
}

/// The values of `range(start, stop)` for a `stop` given as a Python value, refusing
/// more than `cap` iterations.
fn range_to(start: i64, stop: &PyValue, cap: u64) -> Result<std::ops::Range<i64>, PyException> {
    let stop = as_index(stop)?;
    if stop <= BigInt::from(start) {
        return Ok(start..start);
    }
    let stop = stop
        .to_i64()
        .filter(|s| (s - start) as u64 <= cap)
        .ok_or_else(too_large)?;
    Ok(start..stop)
}

/// CPython's `sorted(items)`: count_run + binary insertion sort (exactly CPython's
/// algorithm for lists shorter than 64, so even TypeErrors name the same operands),
/// stable, comparing with `<` only.
fn py_sorted(mut items: Vec<PyValue>, reverse: bool) -> Result<Vec<PyValue>, PyException> {
    if reverse {
        items.reverse();
    }
    let n = items.len();
    if n >= 2 {
        // count_run
        let mut run = 2;
        if py_lt(&items[1], &items[0])? {
            while run < n && py_lt(&items[run], &items[run - 1])? {
                run += 1;
            }
            items[..run].reverse();
        } else {
            while run < n && !py_lt(&items[run], &items[run - 1])? {
                run += 1;
            }
        }
        // binarysort(lo, hi, start=run)
        for start in run..n {
            let pivot = items[start].clone();
            let (mut l, mut r) = (0, start);
            while l < r {
                let p = l + ((r - l) >> 1);
                if py_lt(&pivot, &items[p])? {
                    r = p;
                } else {
                    l = p + 1;
                }
            }
            let v = items.remove(start);
            items.insert(l, v);
        }
    }
    if reverse {
        items.reverse();
    }
    Ok(items)
}

/// The `reverse=` flag of `sorted`: must be an int (bools are ints).
fn reverse_flag(v: &PyValue) -> Result<bool, PyException> {
    Ok(!as_index(v)?.is_zero())
}

/// Python's `int(s, 2)`.
fn int_base2(v: &PyValue) -> Result<BigInt, PyException> {
    let s = match v {
        PyValue::Str(s) => s,
        _ => {
            return Err(exc(
                "TypeError",
                "int() can't convert non-string with explicit base",
            ))
        }
    };
    let bad = || {
        exc(
            "ValueError",
            format!("invalid literal for int() with base 2: {}", v.repr()),
        )
    };
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (t, prefixed) = match t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
        Some(rest) => (rest, true),
        None => (t, false),
    };
    // underscores: single, between digits (or right after the 0b prefix)
    let mut digits = String::new();
    let mut prev_us = false;
    for (i, c) in t.chars().enumerate() {
        match c {
            '0' | '1' => {
                digits.push(c);
                prev_us = false;
            }
            '_' if !prev_us && (i > 0 || prefixed) => prev_us = true,
            _ => return Err(bad()),
        }
    }
    if digits.is_empty() || prev_us {
        return Err(bad());
    }
    let n = BigInt::parse_bytes(digits.as_bytes(), 2).ok_or_else(bad)?;
    Ok(if neg { -n } else { n })
}

/// Python's `bin(n)`.
fn py_bin(n: &BigInt) -> String {
    if n.is_negative() {
        format!("-0b{}", (-n).to_str_radix(2))
    } else {
        format!("0b{}", n.to_str_radix(2))
    }
}

// ---------------------------------------------------------------------------------------
// dispatch
// ---------------------------------------------------------------------------------------

/// Runs pure function `name`; `None` if it is not one of the pure functions.
pub fn call(name: &str, a: &BoundArgs) -> Option<R> {
    // Binding guarantees every parameter has a value; a missing one reads as None.
    let none = PyValue::None;
    let g = |i: usize| a.at(i).unwrap_or(&none);
    Some(match name {
        "calculate_triangle_area" => mul(g(0), g(1)).and_then(|p| div(&p, &int(2))),
        "get_distance" => get_distance(g(0), g(1)),
        "math_factorial" => math_factorial(g(0)),
        "quadratic_roots" => quadratic_roots(g(0), g(1), g(2)),
        "geometry_area_circle" => pow(g(0), &int(2)).and_then(|r2| mul(&float(std::f64::consts::PI), &r2)),
        "get_prime_factors" => get_prime_factors(g(0)),
        "math_gcd" => math_gcd(g(0), g(1), 0),
        "math_lcm" => math_lcm(g(0), g(1)),
        "calculate_final_velocity" => mul(g(1), g(2)).and_then(|at| add(g(0), &at)),
        "calculate_displacement" => calculate_displacement(g(0), g(1), g(2)),
        "calculate_electrostatic_potential_energy" => mul(g(0), g(1)),
        "calculate_density" => div(g(0), g(1)),
        "mat_mul" => mat_mul(g(0), g(1)),
        "calculate_mean" => calculate_mean(g(0)),
        "calculate_standard_deviation" => calculate_standard_deviation(g(0)),
        "calc_binomial_probability" => calc_binomial_probability(g(0), g(1), g(2)),
        "calculate_permutations" => calculate_permutations(g(0), g(1)),
        "get_fibonacci_sequence" => get_fibonacci_sequence(g(0)),
        "get_fibonacci_number" => get_fibonacci_number(g(0)),
        "estimate_derivative" => estimate_derivative(g(0), g(1)),
        "calculate_cosine_similarity" => calculate_cosine_similarity(g(0), g(1)),
        "mortgage_calculator" => mortgage_calculator(g(0), g(1), g(2)),
        "calculate_future_value" => add(&int(1), g(1))
            .and_then(|b| pow(&b, g(2)))
            .and_then(|f| mul(g(0), &f)),
        "sort_array" => {
            let items = py_iter(g(0));
            items.and_then(|items| {
                let rev = reverse_flag(g(1))?;
                py_sorted(items, rev).map(PyValue::List)
            })
        }
        "linear_regression" => linear_regression(g(0), g(1), g(2)),
        "add_binary_numbers" => add_binary_numbers(g(0), g(1)),
        "maxPoints" => max_points(g(0)),
        "calculate_investment_value" => {
            calculate_investment_value(g(0), g(1), g(2), g(3), g(4), g(5))
        }
        "calculate_nutritional_needs" => {
            calculate_nutritional_needs(g(0), g(1), g(2), g(3), g(4), g(5))
        }
        "book_room" => book_room(g(0), g(1), g(2), g(3), g(4), g(5)),
        "order_food" => order_food(g(0), g(1), g(2)),
        "polygon_area" => polygon_area(g(0)),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------
// the functions
// ---------------------------------------------------------------------------------------

/// `((A[0] - B[0]) ** 2 + (A[1] - B[1]) ** 2) ** 0.5`
fn get_distance(pa: &PyValue, pb: &PyValue) -> R {
    let dx = pow(&sub(&idx(pa, 0)?, &idx(pb, 0)?)?, &int(2))?;
    let dy = pow(&sub(&idx(pa, 1)?, &idx(pb, 1)?)?, &int(2))?;
    pow(&add(&dx, &dy)?, &float(0.5))
}

/// `result = 1; for i in range(1, n + 1): result *= i`
fn math_factorial(n: &PyValue) -> R {
    let stop = add(n, &int(1))?;
    let range = range_to(1, &stop, MAX_FACTORIAL)?;
    let mut result = BigInt::from(1u8);
    for i in range {
        result *= i;
    }
    Ok(PyValue::Int(result))
}

/// `d = b**2 - 4*a*c`, then real roots or `{"real", "imaginary"}` dicts.
fn quadratic_roots(a: &PyValue, b: &PyValue, c: &PyValue) -> R {
    let d = sub(&pow(b, &int(2))?, &mul(&mul(&int(4), a)?, c)?)?;
    if compare(">=", &d, &int(0))? {
        let sq = pow(&d, &float(0.5))?;
        let neg_b = unary(UnaryOp::Neg, b)?;
        let r1 = div(&add(&neg_b, &sq)?, &mul(&int(2), a)?)?;
        let sq = pow(&d, &float(0.5))?;
        let neg_b = unary(UnaryOp::Neg, b)?;
        let r2 = div(&sub(&neg_b, &sq)?, &mul(&int(2), a)?)?;
        Ok(PyValue::List(vec![r1, r2]))
    } else {
        let real = div(&unary(UnaryOp::Neg, b)?, &mul(&int(2), a)?)?;
        let abs_d = unary(UnaryOp::Neg, &d)?; // d < 0, so abs(d) == -d
        let imag = div(&pow(&abs_d, &float(0.5))?, &mul(&int(2), a)?)?;
        let neg_imag = unary(UnaryOp::Neg, &imag)?;
        let entry = |im: PyValue| {
            PyValue::Dict(vec![
                (PyValue::str("real"), real.clone()),
                (PyValue::str("imaginary"), im),
            ])
        };
        Ok(PyValue::List(vec![entry(imag), entry(neg_imag)]))
    }
}

/// Trial division: `while number > 1: while number % divisor == 0: factors.append(divisor);
/// number /= divisor; divisor += 1` (so `number` becomes a float after the first hit).
fn get_prime_factors(number: &PyValue) -> R {
    let mut number = number.clone();
    let mut factors = Vec::new();
    let mut divisor: u64 = 2;
    let mut steps: u64 = 0;
    loop {
        if !compare(">", &number, &int(1))? {
            break;
        }
        loop {
            steps += 1;
            if steps > MAX_STEPS {
                return Err(too_long());
            }
            // fast paths with identical results for the common int / float states
            let hit = match &number {
                PyValue::Int(n) if n.bits() < 63 => {
                    let n = n.to_i64().unwrap_or(0);
                    n.rem_euclid(divisor as i64) == 0
                }
                PyValue::Float(x) => {
                    let m = modulo(&float(*x), &PyValue::Int(BigInt::from(divisor)))?;
                    matches!(m, PyValue::Float(f) if f == 0.0)
                }
                other => modulo(other, &PyValue::Int(BigInt::from(divisor)))?.py_eq(&int(0)),
            };
            if !hit {
                break;
            }
            factors.push(PyValue::Int(BigInt::from(divisor)));
            number = div(&number, &PyValue::Int(BigInt::from(divisor)))?;
        }
        divisor += 1;
    }
    Ok(PyValue::List(factors))
}

/// `if b == 0: return a; return math_gcd(b, a % b)`
fn math_gcd(a: &PyValue, b: &PyValue, depth: usize) -> R {
    let (mut a, mut b) = (a.clone(), b.clone());
    let mut depth = depth;
    loop {
        if b.py_eq(&int(0)) {
            return Ok(a);
        }
        depth += 1;
        if depth >= RECURSION_LIMIT {
            return Err(exc(
                "RecursionError",
                "maximum recursion depth exceeded in comparison",
            ));
        }
        let r = modulo(&a, &b)?;
        a = b;
        b = r;
    }
}

/// `a * b / math_gcd(a, b)`
fn math_lcm(a: &PyValue, b: &PyValue) -> R {
    let prod = mul(a, b)?;
    div(&prod, &math_gcd(a, b, 0)?)
}

/// `v0 * t + 0.5 * a * t**2`
fn calculate_displacement(v0: &PyValue, acc: &PyValue, t: &PyValue) -> R {
    let first = mul(v0, t)?;
    let second = mul(&mul(&float(0.5), acc)?, &pow(t, &int(2))?)?;
    add(&first, &second)
}

/// Triple loop with `result[i][j] += A[i][k] * B[k][j]`, result initialised with int 0.
fn mat_mul(ma: &PyValue, mb: &PyValue) -> R {
    let rows = py_len(ma)?;
    let mut result: Vec<Vec<PyValue>> = Vec::with_capacity(rows);
    for _ in 0..rows {
        let cols = py_len(&idx(mb, 0)?)?;
        result.push(vec![int(0); cols]);
    }
    for (i, row) in result.iter_mut().enumerate() {
        let cols = py_len(&idx(mb, 0)?)?;
        for j in 0..cols {
            let inner = py_len(mb)?;
            for k in 0..inner {
                let a_ik = idx(&idx(ma, i as i64)?, k as i64)?;
                let b_kj = idx(&idx(mb, k as i64)?, j as i64)?;
                let prod = mul(&a_ik, &b_kj)?;
                let cell = row.get_mut(j).ok_or_else(|| exc("IndexError", "list index out of range"))?;
                *cell = add(cell, &prod)?;
            }
        }
    }
    Ok(PyValue::List(result.into_iter().map(PyValue::List).collect()))
}

/// `sum(numbers) / len(numbers)`
fn calculate_mean(numbers: &PyValue) -> R {
    let s = py_sum(py_iter(numbers)?.into_iter().map(Ok))?;
    div(&s, &int(py_len(numbers)? as i64))
}

/// Population SD: `mean = sum/len; var = sum((x - mean) ** 2 for x) / len; var ** 0.5`
fn calculate_standard_deviation(numbers: &PyValue) -> R {
    let mean = calculate_mean(numbers)?;
    let items = py_iter(numbers)?;
    let var_sum = py_sum(
        items
            .iter()
            .map(|x| sub(x, &mean).and_then(|d| pow(&d, &int(2)))),
    )?;
    let var = div(&var_sum, &int(py_len(numbers)? as i64))?;
    pow(&var, &float(0.5))
}

/// `fact(n) / (fact(k) * fact(n - k)) * (p**k * (1 - p) ** (n - k))`
fn calc_binomial_probability(n: &PyValue, k: &PyValue, p: &PyValue) -> R {
    let fn_ = math_factorial(n)?;
    let fk = math_factorial(k)?;
    let fnk = math_factorial(&sub(n, k)?)?;
    let coef = div(&fn_, &mul(&fk, &fnk)?)?;
    let pk = pow(p, k)?;
    let q = pow(&sub(&int(1), p)?, &sub(n, k)?)?;
    mul(&coef, &mul(&pk, &q)?)
}

/// `fact(n) / fact(n - k)`
fn calculate_permutations(n: &PyValue, k: &PyValue) -> R {
    let a = math_factorial(n)?;
    let b = math_factorial(&sub(n, k)?)?;
    div(&a, &b)
}

/// `fib = [0, 1]; while len(fib) < n: fib.append(fib[-1] + fib[-2])`
fn get_fibonacci_sequence(n: &PyValue) -> R {
    let mut fib = vec![int(0), int(1)];
    while compare("<", &int(fib.len() as i64), n)? {
        if fib.len() as u64 >= MAX_FIBONACCI {
            return Err(too_large());
        }
        let next = add(&fib[fib.len() - 1], &fib[fib.len() - 2])?;
        fib.push(next);
    }
    Ok(PyValue::List(fib))
}

/// `n <= 0` -> message string; 1 -> 0; 2 -> 1; else iterate `a, b = b, a + b` over
/// `range(2, n)`.
fn get_fibonacci_number(n: &PyValue) -> R {
    if compare("<=", n, &int(0))? {
        return Ok(PyValue::str("Input should be a positive integer."));
    }
    if n.py_eq(&int(1)) {
        return Ok(int(0));
    }
    if n.py_eq(&int(2)) {
        return Ok(int(1));
    }
    let range = range_to(2, n, MAX_FIBONACCI)?;
    let (mut a, mut b) = (BigInt::zero(), BigInt::from(1u8));
    for _ in range {
        let next = &a + &b;
        a = std::mem::replace(&mut b, next);
    }
    Ok(PyValue::Int(b))
}

/// `func = eval(function); h = 1e-10; (func(x + h) - func(x)) / h`
fn estimate_derivative(function: &PyValue, x: &PyValue) -> R {
    let src = match function {
        PyValue::Str(s) => s,
        _ => {
            return Err(exc(
                "TypeError",
                "eval() arg 1 must be a string, bytes or code object",
            ))
        }
    };
    with_eval_stack(|| {
        let func = eval_expression(src, &[("function", function.clone()), ("x", x.clone())])?;
        let h = float(1e-10);
        let xh = add(x, &h)?;
        let f1 = func.call(&[xh])?;
        let f0 = func.call(std::slice::from_ref(x))?;
        div(&sub(&f1, &f0)?, &h)
    })
}

/// `dot / (|A| * |B|)` with `sum(A[i] * B[i] for i in range(len(A)))` and norms
/// `sum(A[i] ** 2 for i in range(len(A))) ** 0.5`.
fn calculate_cosine_similarity(va: &PyValue, vb: &PyValue) -> R {
    let na = py_len(va)? as i64;
    let dot = py_sum((0..na).map(|i| mul(&idx(va, i)?, &idx(vb, i)?)))?;
    let mag_a = pow(
        &py_sum((0..na).map(|i| pow(&idx(va, i)?, &int(2))))?,
        &float(0.5),
    )?;
    let nb = py_len(vb)? as i64;
    let mag_b = pow(
        &py_sum((0..nb).map(|i| pow(&idx(vb, i)?, &int(2))))?,
        &float(0.5),
    )?;
    div(&dot, &mul(&mag_a, &mag_b)?)
}

/// `r = rate / 12; n = period * 12; L * r * (1 + r) ** n / ((1 + r) ** n - 1)`
fn mortgage_calculator(loan: &PyValue, rate: &PyValue, period: &PyValue) -> R {
    let r = div(rate, &int(12))?;
    let n = mul(period, &int(12))?;
    let num = mul(&mul(loan, &r)?, &pow(&add(&int(1), &r)?, &n)?)?;
    let den = sub(&pow(&add(&int(1), &r)?, &n)?, &int(1))?;
    div(&num, &den)
}

/// Ordinary least squares over `n = len(x)`, evaluated at `point`.
fn linear_regression(x: &PyValue, y: &PyValue, point: &PyValue) -> R {
    let n = int(py_len(x)? as i64);
    let nn = py_len(x)? as i64;
    let sum_x = py_sum(py_iter(x)?.into_iter().map(Ok))?;
    let sum_y = py_sum(py_iter(y)?.into_iter().map(Ok))?;
    let sum_xy = py_sum((0..nn).map(|i| mul(&idx(x, i)?, &idx(y, i)?)))?;
    let sum_x2 = py_sum((0..nn).map(|i| pow(&idx(x, i)?, &int(2))))?;
    let slope = div(
        &sub(&mul(&n, &sum_xy)?, &mul(&sum_x, &sum_y)?)?,
        &sub(&mul(&n, &sum_x2)?, &pow(&sum_x, &int(2))?)?,
    )?;
    let intercept = div(&sub(&sum_y, &mul(&slope, &sum_x)?)?, &n)?;
    add(&mul(&slope, point)?, &intercept)
}

/// `bin(int(a, 2) + int(b, 2))[2:]`
fn add_binary_numbers(a: &PyValue, b: &PyValue) -> R {
    let x = int_base2(a)?;
    let y = int_base2(b)?;
    let s = py_bin(&(x + y));
    Ok(PyValue::Str(s.chars().skip(2).collect()))
}

/// Slope counting with float keys (`"inf"` for vertical pairs); returns max count + 1.
fn max_points(points: &PyValue) -> R {
    let n = py_len(points)?;
    if n < 2 {
        return Ok(int(1));
    }
    let mut counter: u64 = 1;
    for i in 0..n as i64 {
        // keys: Some(bits of a float slope, with -0.0 folded into 0.0) or None for "inf"
        let mut counts: Vec<(Option<u64>, u64)> = Vec::new();
        let mut nan_keys: u64 = 0;
        for j in (i + 1)..n as i64 {
            let pj = idx(points, j)?;
            let pi = idx(points, i)?;
            let dy = sub(&idx(&pj, 1)?, &idx(&pi, 1)?)?;
            let dx = sub(&idx(&pj, 0)?, &idx(&pi, 0)?)?;
            let key = if !dx.py_eq(&int(0)) {
                match div(&dy, &dx)? {
                    PyValue::Float(s) if s.is_nan() => {
                        nan_keys += 1;
                        continue;
                    }
                    PyValue::Float(s) => Some(if s == 0.0 { 0 } else { s.to_bits() }),
                    _ => None,
                }
            } else {
                None
            };
            match counts.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 += 1,
                None => counts.push((key, 1)),
            }
        }
        for (_, c) in &counts {
            counter = counter.max(*c);
        }
        if nan_keys > 0 {
            counter = counter.max(1);
        }
    }
    Ok(PyValue::Int(BigInt::from(counter + 1)))
}

/// Year loop with nominal and inflation-adjusted values (see the spec table).
fn calculate_investment_value(
    initial: &PyValue,
    contribution: &PyValue,
    years: &PyValue,
    ret: &PyValue,
    inflation: &PyValue,
    adjust: &PyValue,
) -> R {
    let mut current = initial.clone();
    let mut real = initial.clone();
    let stop = add(years, &int(1))?;
    for year in range_to(1, &stop, MAX_YEARS)? {
        current = add(&mul(&current, &add(&int(1), ret)?)?, contribution)?;
        if adjust.truthy() {
            let y = int(year);
            let adj = if compare("<=", &y, &int(py_len(inflation)? as i64))? {
                sub(&int(1), &idx(inflation, year - 1)?)?
            } else {
                sub(&int(1), &idx(inflation, -1)?)?
            };
            let growth = sub(&add(&int(1), ret)?, &idx(inflation, year - 1)?)?;
            real = add(&mul(&real, &growth)?, &mul(contribution, &adj)?)?;
        }
    }
    Ok(if adjust.truthy() { real } else { current })
}

/// Harris-Benedict BMR x activity factor, +-500 for gain/lose, macro split.
fn calculate_nutritional_needs(
    weight: &PyValue,
    height: &PyValue,
    age: &PyValue,
    gender: &PyValue,
    level: &PyValue,
    goal: &PyValue,
) -> R {
    let (base, cw, ch, ca) = if gender.py_eq(&PyValue::str("male")) {
        (88.362, 13.397, 4.799, 5.677)
    } else {
        (447.593, 9.247, 3.098, 4.330)
    };
    let bmr = sub(
        &add(
            &add(&float(base), &mul(&float(cw), weight)?)?,
            &mul(&float(ch), height)?,
        )?,
        &mul(&float(ca), age)?,
    )?;
    let factors = PyValue::List(
        [1.2, 1.375, 1.55, 1.725, 1.9]
            .iter()
            .map(|f| float(*f))
            .collect(),
    );
    let mut tdee = mul(&bmr, &getitem(&factors, &sub(level, &int(1))?)?)?;
    if goal.py_eq(&PyValue::str("lose")) {
        tdee = sub(&tdee, &int(500))?;
    } else if goal.py_eq(&PyValue::str("gain")) {
        tdee = add(&tdee, &int(500))?;
    }
    let proteins = div(&mul(&tdee, &float(0.30))?, &int(4))?;
    let fats = div(&mul(&tdee, &float(0.25))?, &int(9))?;
    let carbs = div(&mul(&tdee, &float(0.45))?, &int(4))?;
    Ok(PyValue::Dict(vec![
        (PyValue::str("calories"), tdee),
        (PyValue::str("proteins_g"), proteins),
        (PyValue::str("fats_g"), fats),
        (PyValue::str("carbohydrates_g"), carbs),
    ]))
}

/// Returns the booking dict; `total_price` is `price * 0.9` for code `DISCOUNT10`.
fn book_room(
    room_type: &PyValue,
    price: &PyValue,
    check_in: &PyValue,
    check_out: &PyValue,
    customer_id: &PyValue,
    discount_code: &PyValue,
) -> R {
    let total = if discount_code.py_eq(&PyValue::str("DISCOUNT10")) {
        mul(price, &float(0.9))?
    } else {
        price.clone()
    };
    Ok(PyValue::Dict(vec![
        (PyValue::str("customer_id"), customer_id.clone()),
        (PyValue::str("room_number"), room_type.clone()),
        (PyValue::str("check_in_date"), check_in.clone()),
        (PyValue::str("check_out_date"), check_out.clone()),
        (PyValue::str("total_price"), total),
    ]))
}

/// `sum(quantity[i] * price[i] for i in range(len(item)))`
fn order_food(item: &PyValue, quantity: &PyValue, price: &PyValue) -> R {
    let n = py_len(item)? as i64;
    py_sum((0..n).map(|i| mul(&idx(quantity, i)?, &idx(price, i)?)))
}

/// Shoelace formula over the vertices with the first one appended.
fn polygon_area(vertices: &PyValue) -> R {
    let n = py_len(vertices)?;
    if n < 3 {
        return Err(exc(
            "ValueError",
            "A polygon must have at least 3 vertices.",
        ));
    }
    let mut vs = match vertices {
        PyValue::List(items) => items.clone(),
        other => {
            return Err(exc(
                "AttributeError",
                format!("'{}' object has no attribute 'append'", other.type_name()),
            ))
        }
    };
    vs.push(vs[0].clone());
    let vs = PyValue::List(vs);
    let mut area = int(0);
    for i in 0..n as i64 {
        let a = mul(&idx(&idx(&vs, i)?, 0)?, &idx(&idx(&vs, i + 1)?, 1)?)?;
        let b = mul(&idx(&idx(&vs, i + 1)?, 0)?, &idx(&idx(&vs, i)?, 1)?)?;
        area = add(&area, &sub(&a, &b)?)?;
    }
    let abs_area = match &area {
        PyValue::Float(x) => float(x.abs()),
        v if v.is_number() => PyValue::Int(v.as_bigint().unwrap_or_default().abs()),
        other => {
            return Err(exc(
                "TypeError",
                format!("bad operand type for abs(): '{}'", other.type_name()),
            ))
        }
    };
    div(&abs_area, &float(2.0))
}
