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

use super::bind::BoundArgs;
use super::builtins::as_index;
pub use super::builtins::{compare, getitem, py_iter, py_len, MAX_FACTORIAL};
use super::exception::PyException;
use super::lambda::{eval_expression, with_eval_stack};
use super::value::{binop, py_lt, unary, BinOp, PyValue, UnaryOp};

/// Longest Fibonacci list / largest Fibonacci index computed.
pub const MAX_FIBONACCI: u64 = 20_000;
/// Most loop iterations a single call may spend (trial division).
pub const MAX_STEPS: u64 = 20_000_000;
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

/// Python's `sum(items)`: left to right from int 0.
fn py_sum<I: IntoIterator<Item = R>>(items: I) -> R {
    let mut acc = int(0);
    for it in items {
        acc = add(&acc, &it?)?;
    }
    Ok(acc)
}

/// `container[i]` with a small integer index.
fn idx(container: &PyValue, i: i64) -> R {
    getitem(container, &int(i))
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
        "geometry_area_circle" => {
            pow(g(0), &int(2)).and_then(|r2| mul(&float(std::f64::consts::PI), &r2))
        }
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
                // float % int: the divisor converts exactly (it stays far below 2**53),
                // and for a positive divisor Python's float modulo is zero exactly
                // when fmod is.
                PyValue::Float(x) => (x % divisor as f64) == 0.0,
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
                let cell = row
                    .get_mut(j)
                    .ok_or_else(|| exc("IndexError", "list index out of range"))?;
                *cell = add(cell, &prod)?;
            }
        }
    }
    Ok(PyValue::List(
        result.into_iter().map(PyValue::List).collect(),
    ))
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

#[cfg(test)]
mod tests {
    use super::super::exec::parse_call;
    use super::super::exec::{run_pure, signature, FnKind, SIGNATURES};
    use super::super::parse::from_json_str;
    use super::*;

    fn run(call: &str) -> String {
        let c = parse_call(call).unwrap_or_else(|e| panic!("{call}: {e}"));
        match run_pure(&c.name, &c.name, &c.kwargs) {
            Some(Ok(v)) => v.repr(),
            Some(Err(e)) => format!("{}: {}", e.kind, e.message),
            None => format!("not pure: {}", c.name),
        }
    }

    /// Expected values: python3 evaluating each call against the formulas of
    /// `bfcl-functions.md` written out as Python (e.g. `calculate_triangle_area = lambda
    /// base, height: base * height / 2`, `math_lcm = lambda a, b: a * b / math_gcd(a, b)`,
    /// `calc_binomial_probability = lambda n, k, p: fact(n) / (fact(k) * fact(n - k)) *
    /// (p**k * (1 - p) ** (n - k))`, ...), printing `repr(result)` or
    /// `f"{type(e).__name__}: {e}"`.
    const CASES: &[(&str, &str)] = &[
        ("calculate_triangle_area(base=500, height=300)", "75000.0"),
        ("calculate_triangle_area(base=7, height=3)", "10.5"),
        ("calculate_triangle_area(base=2.5, height='a')", "TypeError: can't multiply sequence by non-int of type 'float'"),
        ("get_distance(pointA=(45.76, 4.85), pointB=(48.85, 2.35))", "3.9746823772472712"),
        ("get_distance(pointA=[0, 0], pointB=[3, 4])", "5.0"),
        ("get_distance(pointA=[0, 0, 9], pointB=[1, 1, 9])", "1.4142135623730951"),
        ("get_distance(pointA=[0], pointB=[1, 1])", "IndexError: list index out of range"),
        ("get_distance(pointA=5, pointB=[1, 1])", "TypeError: 'int' object is not subscriptable"),
        ("math_factorial(n=7)", "5040"),
        ("math_factorial(n=0)", "1"),
        ("math_factorial(n=-3)", "1"),
        ("math_factorial(n=30)", "265252859812191058636308480000000"),
        ("math_factorial(n=True)", "1"),
        ("math_factorial(n=5.0)", "TypeError: 'float' object cannot be interpreted as an integer"),
        ("math_factorial(n='5')", "TypeError: can only concatenate str (not \"int\") to str"),
        ("quadratic_roots(a=3, b=7, c=-10)", "[1.0, -3.3333333333333335]"),
        ("quadratic_roots(a=5, b=-8, c=2)", "[1.2898979485566355, 0.31010205144336445]"),
        ("quadratic_roots(a=1, b=2, c=5)", "[{'real': -1.0, 'imaginary': 2.0}, {'real': -1.0, 'imaginary': -2.0}]"),
        ("quadratic_roots(a=0, b=2, c=1)", "ZeroDivisionError: float division by zero"),
        ("quadratic_roots(a=1.5, b=0.1, c=-2.25)", "[1.1918650632992736, -1.2585317299659404]"),
        ("geometry_area_circle(radius=15)", "706.8583470577034"),
        ("geometry_area_circle(radius=0.5)", "0.7853981633974483"),
        ("geometry_area_circle(radius=10**200)", "OverflowError: int too large to convert to float"),
        ("get_prime_factors(number=4567)", "[4567]"),
        ("get_prime_factors(number=7891)", "[13, 607]"),
        ("get_prime_factors(number=360)", "[2, 2, 2, 3, 3, 5]"),
        ("get_prime_factors(number=1)", "[]"),
        ("get_prime_factors(number=0)", "[]"),
        ("get_prime_factors(number=-12)", "[]"),
        ("get_prime_factors(number=97.0)", "[97]"),
        ("get_prime_factors(number=2**40)", "[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]"),
        ("get_prime_factors(number='12')", "TypeError: '>' not supported between instances of 'str' and 'int'"),
        ("math_gcd(a=450, b=300)", "150"),
        ("math_gcd(a=-4, b=6)", "2"),
        ("math_gcd(a=0, b=0)", "0"),
        ("math_gcd(a=7.5, b=2.5)", "2.5"),
        ("math_gcd(a=[0, 0], b=[1, 2])", "TypeError: unsupported operand type(s) for %: 'list' and 'list'"),
        ("math_lcm(a=24, b=18)", "72.0"),
        ("math_lcm(a=-4, b=6)", "-12.0"),
        ("math_lcm(a=0, b=0)", "ZeroDivisionError: division by zero"),
        ("math_lcm(a=0.0, b=0)", "ZeroDivisionError: float division by zero"),
        ("calculate_final_velocity(initial_velocity=0, acceleration=9.8, time=12)", "117.60000000000001"),
        ("calculate_final_velocity(initial_velocity=1, acceleration=2, time=3)", "7"),
        ("calculate_displacement(initial_velocity=15.0, acceleration=9.8, time=10)", "640.0"),
        ("calculate_displacement(initial_velocity=25, acceleration=15, time=8)", "680.0"),
        ("calculate_displacement(initial_velocity=1, acceleration=0.3, time=0.7)", "0.7735"),
        ("calculate_electrostatic_potential_energy(charge=7.8, voltage=15.2)", "118.55999999999999"),
        ("calculate_electrostatic_potential_energy(charge=5, voltage=10)", "50"),
        ("calculate_electrostatic_potential_energy(charge='ab', voltage=3)", "'ababab'"),
        ("calculate_density(mass=50, volume=10)", "5.0"),
        ("calculate_density(mass=1, volume=3)", "0.3333333333333333"),
        ("calculate_density(mass=1, volume=0)", "ZeroDivisionError: division by zero"),
        ("calculate_density(mass=1.0, volume=0)", "ZeroDivisionError: float division by zero"),
        ("mat_mul(matA=[[1, 2], [3, 4]], matB=[[5, 6], [7, 8]])", "[[19, 22], [43, 50]]"),
        ("mat_mul(matA=[[1.5, 2], [3, 4]], matB=[[5, 6], [7, 8]])", "[[21.5, 25.0], [43, 50]]"),
        ("mat_mul(matA=[[1, 2, 3]], matB=[[1], [2], [3]])", "[[14]]"),
        ("mat_mul(matA=[[1, 2]], matB=[[1, 2]])", "[[1, 2]]"),
        ("mat_mul(matA=[], matB=[])", "[]"),
        ("mat_mul(matA=[[1]], matB=[])", "IndexError: list index out of range"),
        ("calculate_mean(numbers=[22, 24, 26, 28, 30])", "26.0"),
        ("calculate_mean(numbers=[0.1, 0.2, 0.3])", "0.20000000000000004"),
        ("calculate_mean(numbers=[])", "ZeroDivisionError: division by zero"),
        ("calculate_mean(numbers=4567)", "TypeError: 'int' object is not iterable"),
        ("calculate_mean(numbers=['a'])", "TypeError: unsupported operand type(s) for +: 'int' and 'str'"),
        ("calculate_mean(numbers=[True, 2, 3.5])", "2.1666666666666665"),
        ("calculate_standard_deviation(numbers=[1000,2000,3000,4000,5000,7000,9000,15000,20000,30000])", "8879.189152169245"),
        ("calculate_standard_deviation(numbers=[4567])", "0.0"),
        ("calculate_standard_deviation(numbers=[0.1, 0.2, 0.3, 0.4])", "0.11180339887498948"),
        ("calculate_standard_deviation(numbers=[])", "ZeroDivisionError: division by zero"),
        ("calc_binomial_probability(n=20, k=5, p=1/6)", "0.1294102919789905"),
        ("calc_binomial_probability(n=20, k=5, p=0.6)", "0.0012944935222876579"),
        ("calc_binomial_probability(n=5, k=7, p=0.5)", "0.000744047619047619"),
        ("calc_binomial_probability(n=200, k=100, p=0.5)", "0.05634847900925642"),
        ("calc_binomial_probability(n=10, k=3, p=1)", "0.0"),
        ("calc_binomial_probability(n=10, k=0, p=0)", "1.0"),
        ("calculate_permutations(n=26, k=5)", "7893600.0"),
        ("calculate_permutations(n=18, k=24)", "6402373705728000.0"),
        ("calculate_permutations(n=300, k=2)", "89700.0"),
        ("get_fibonacci_sequence(n=20)", "[0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181]"),
        ("get_fibonacci_sequence(n=1)", "[0, 1]"),
        ("get_fibonacci_sequence(n=-5)", "[0, 1]"),
        ("get_fibonacci_sequence(n=5.5)", "[0, 1, 1, 2, 3, 5]"),
        ("get_fibonacci_sequence(n='a')", "TypeError: '<' not supported between instances of 'int' and 'str'"),
        ("get_fibonacci_number(n=15)", "377"),
        ("get_fibonacci_number(n=1)", "0"),
        ("get_fibonacci_number(n=2)", "1"),
        ("get_fibonacci_number(n=0)", "'Input should be a positive integer.'"),
        ("get_fibonacci_number(n=100)", "218922995834555169026"),
        ("get_fibonacci_number(n=3.5)", "TypeError: 'float' object cannot be interpreted as an integer"),
        ("estimate_derivative(function='lambda x: 3*x**2 + 2*x + 1', x=5)", "32.00000264769187"),
        ("estimate_derivative(function='lambda x: 4*x**3 + 3*x**2 + 2*x + 1', x=7)", "632.0010470517445"),
        ("estimate_derivative(function='lambda x: x**5 - 2*x**4 + 3*x**3 - 2*x**2 + x - 1', x=2)", "45.00002148688509"),
        ("estimate_derivative(function='lambda x:x**2', x=3.5)", "7.000000579182597"),
        ("estimate_derivative(function='3*x**2 + 2*x + 1', x=5)", "TypeError: 'int' object is not callable"),
        ("estimate_derivative(function='square', x=5)", "NameError: name 'square' is not defined"),
        ("estimate_derivative(function=5, x=5)", "TypeError: eval() arg 1 must be a string, bytes or code object"),
        ("estimate_derivative(function='lambda x: x', x='a')", "TypeError: can only concatenate str (not \"float\") to str"),
        ("calculate_cosine_similarity(vectorA=[0.5, 0.7, 0.2, 0.9, 0.1], vectorB=[0.4, 0.6, 0.3, 0.8, 0.2])", "0.9884017323417256"),
        ("calculate_cosine_similarity(vectorA=[9.8], vectorB=[12])", "1.0"),
        ("calculate_cosine_similarity(vectorA=[1, 2], vectorB=[3, 4])", "0.9838699100999074"),
        ("calculate_cosine_similarity(vectorA=[0, 0], vectorB=[3, 4])", "ZeroDivisionError: float division by zero"),
        ("calculate_cosine_similarity(vectorA=[1, 2, 3], vectorB=[3, 4])", "IndexError: list index out of range"),
        ("calculate_cosine_similarity(vectorA=[1, 2], vectorB=[3, 4, 5])", "0.6957010852370434"),
        ("mortgage_calculator(loan_amount=350000, interest_rate=0.035, loan_period=30)", "1571.656407330882"),
        ("mortgage_calculator(loan_amount=500000, interest_rate=4.5, loan_period=25)", "187500.0"),
        ("mortgage_calculator(loan_amount=500000, interest_rate=4.5, loan_period=300)", "OverflowError: (34, 'Numerical result out of range')"),
        ("mortgage_calculator(loan_amount=500000, interest_rate=0, loan_period=30)", "ZeroDivisionError: float division by zero"),
        ("calculate_future_value(present_value=5000, interest_rate=0.05, periods=10)", "8144.47313388721"),
        ("calculate_future_value(present_value=1000000, interest_rate=0.1, periods=3)", "1331000.0000000005"),
        ("calculate_future_value(present_value=1000, interest_rate=1, periods=3)", "8000"),
        ("sort_array(array=[34, 2, 56, 7, 9, 12], reverse=True)", "[56, 34, 12, 9, 7, 2]"),
        ("sort_array(array=[1, 2.0, True, 1.0, 0.5])", "[0.5, 1, True, 1.0, 2.0]"),
        ("sort_array(array=[1, 2.0, True, 1.0, 0.5], reverse=True)", "[2.0, 1, True, 1.0, 0.5]"),
        ("sort_array(array=['b', 'a', 'C'])", "['C', 'a', 'b']"),
        ("sort_array(array=[1, 'a', 2])", "TypeError: '<' not supported between instances of 'str' and 'int'"),
        ("sort_array(array=[3, 2, 'a'])", "TypeError: '<' not supported between instances of 'str' and 'int'"),
        ("sort_array(array=[[2, 1], [1, 5], [1]])", "[[1], [1, 5], [2, 1]]"),
        ("sort_array(array='bca')", "['a', 'b', 'c']"),
        ("sort_array(array=[3, 1], reverse='yes')", "TypeError: 'str' object cannot be interpreted as an integer"),
        ("sort_array(array=[3, 1], reverse=None)", "TypeError: 'NoneType' object cannot be interpreted as an integer"),
        ("sort_array(array=5)", "TypeError: 'int' object is not iterable"),
        ("linear_regression(x=[1,2,3],y=[4,5,6],point=10)", "13.0"),
        ("linear_regression(x=[1,2,-3],y=[4,-5,6],point=10)", "-15.476190476190476"),
        ("linear_regression(x=[1,2,-3],y=[4,-5,6],point=1)", "-0.04761904761904745"),
        ("linear_regression(x=[0.5, 1.5, 2.5],y=[1, 2.5, 2],point=4)", "3.083333333333333"),
        ("linear_regression(x=[1,1,1],y=[4,5,6],point=10)", "ZeroDivisionError: division by zero"),
        ("add_binary_numbers(a='0011',b='1100')", "'1111'"),
        ("add_binary_numbers(a='10011',b='1100')", "'11111'"),
        ("add_binary_numbers(a='0',b='0')", "'0'"),
        ("add_binary_numbers(a='-111',b='0b1_01')", "'b10'"),
        ("add_binary_numbers(a='12',b='1')", "ValueError: invalid literal for int() with base 2: '12'"),
        ("add_binary_numbers(a=101,b='1')", "TypeError: int() can't convert non-string with explicit base"),
        ("maxPoints(points=[[1,1],[2,2],[3,4],[5,5]])", "3"),
        ("maxPoints(points=[[1,1],[2,3],[4,6],[5,5]])", "2"),
        ("maxPoints(points=[[1,1]])", "1"),
        ("maxPoints(points=[[1,1],[1,1],[1,1]])", "3"),
        ("maxPoints(points=[[1,1],[1,2],[1,3],[2,2]])", "3"),
        ("maxPoints(points=[[0,0],[1,-0.0],[2,0]])", "3"),
        ("calculate_investment_value(initial_investment=10000,annual_contribution=1000,years=5,annual_return=0.05,inflation_rate=[0.01,0.02,0.03,0.04,0.04])", "16145.646273400002"),
        ("calculate_investment_value(initial_investment=1000000,annual_contribution=1000,years=3,annual_return=0.1,inflation_rate=[0.01,0.04,0.04], adjust_for_inflation=False)", "1334310.0"),
        ("calculate_investment_value(initial_investment=1000,annual_contribution=100,years=3,annual_return=0.1,inflation_rate=[0.01])", "IndexError: list index out of range"),
        ("calculate_investment_value(initial_investment=1000,annual_contribution=100,years=3,annual_return=0.1,inflation_rate=[0.01], adjust_for_inflation=False)", "1662.0000000000002"),
        ("calculate_investment_value(initial_investment=1000,annual_contribution=100,years=2.0,annual_return=0.1,inflation_rate=[0.01])", "TypeError: 'float' object cannot be interpreted as an integer"),
        ("calculate_nutritional_needs(weight=100,height=170,age=30,gender='male',activity_level=1,goal='lose')", "{'calories': 1988.2984000000001, 'proteins_g': 149.12238, 'fats_g': 55.23051111111111, 'carbohydrates_g': 223.68357000000003}"),
        ("calculate_nutritional_needs(weight=59,height=170,age=80,gender='female',activity_level=4,goal='lose')", "{'calories': 1524.15985, 'proteins_g': 114.31198875, 'fats_g': 42.33777361111111, 'carbohydrates_g': 171.46798312500002}"),
        ("calculate_nutritional_needs(weight=70,height=180,age=25,gender='other',activity_level=0,goal='gain')", "{'calories': 3434.1187, 'proteins_g': 257.5589025, 'fats_g': 95.39218611111112, 'carbohydrates_g': 386.33835375}"),
        ("calculate_nutritional_needs(weight=70,height=180,age=25,gender='male',activity_level=6,goal='gain')", "IndexError: list index out of range"),
        ("calculate_nutritional_needs(weight=70,height=180,age=25,gender='male',activity_level=1.0,goal='gain')", "TypeError: list indices must be integers or slices, not float"),
        ("calculate_nutritional_needs(weight=70,height=180,age=25,gender='male',activity_level='1',goal='gain')", "TypeError: unsupported operand type(s) for -: 'str' and 'int'"),
        ("book_room(room_type='deluxe',price=1000,check_in_date='08-11-2024',check_out_date='08-15-2024',customer_id='123')", "{'customer_id': '123', 'room_number': 'deluxe', 'check_in_date': '08-11-2024', 'check_out_date': '08-15-2024', 'total_price': 1000}"),
        ("book_room(room_type='king',price=10000,check_in_date='12-11-2023',check_out_date='08-15-2024',customer_id=123,discount_code='DISCOUNT10')", "{'customer_id': 123, 'room_number': 'king', 'check_in_date': '12-11-2023', 'check_out_date': '08-15-2024', 'total_price': 9000.0}"),
        ("book_room(room_type='king',price='x',check_in_date='a',check_out_date='b',customer_id='c',discount_code='DISCOUNT10')", "TypeError: can't multiply sequence by non-int of type 'float'"),
        ("order_food(item=['burger','ice cream'], quantity=[10,7], price=[5,2])", "64"),
        ("order_food(item=['dumplings','rice bowl'], quantity=[101,20], price=[0.1,10])", "210.1"),
        ("order_food(item=['a','b','c'], quantity=[1,2], price=[1,2])", "IndexError: list index out of range"),
        ("order_food(item=['a'], quantity=[1,2], price=[1.5,2])", "1.5"),
        ("order_food(item='burger', quantity=10, price=5)", "TypeError: 'int' object is not subscriptable"),
        ("polygon_area(vertices=[[1,2],[3,4],[1,3]])", "1.0"),
        ("polygon_area(vertices=[[1,2],[3,4],[1,4],[3,7]])", "0.0"),
        ("polygon_area(vertices=[[0,0],[4,0],[4,3.5]])", "7.0"),
        ("polygon_area(vertices=[[1,2],[3,4]])", "ValueError: A polygon must have at least 3 vertices."),
    ];

    #[test]
    fn pure_functions_match_python() {
        let mut failures = Vec::new();
        for (call, want) in CASES {
            let got = run(call);
            if got != *want {
                failures.push(format!("{call}\n   want {want}\n    got {got}"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} mismatches:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn every_pure_function_is_covered_and_dispatched() {
        let pure: Vec<&str> = SIGNATURES
            .iter()
            .filter(|s| s.kind == FnKind::Pure)
            .map(|s| s.name)
            .collect();
        assert_eq!(pure.len(), 32);
        // the 71 names of exec_simple/exec_multiple plus get_fibonacci_number
        assert_eq!(SIGNATURES.len(), 72);
        for name in pure {
            assert!(
                CASES
                    .iter()
                    .any(|(c, _)| c.starts_with(&format!("{name}("))),
                "no test case for {name}"
            );
        }
        assert!(signature("get_weather_data").is_some());
        assert!(run_pure("get_weather_data", "f", &[]).is_none());
    }

    /// No input may panic: every pure function with no arguments, with each argument
    /// replaced by values of every type, and with hostile sizes.
    #[test]
    fn never_panics() {
        let samples = [
            PyValue::None,
            PyValue::Bool(true),
            PyValue::int(0),
            PyValue::int(-7),
            PyValue::Int(BigInt::from(10u8).pow(400)),
            PyValue::Float(f64::NAN),
            PyValue::Float(-0.0),
            PyValue::Float(f64::INFINITY),
            PyValue::str(""),
            PyValue::str("lambda x: (lambda f: f(f))(lambda f: f(f))"),
            PyValue::List(vec![]),
            PyValue::List(vec![
                PyValue::List(vec![PyValue::int(1)]),
                PyValue::str("a"),
            ]),
            PyValue::Tuple(vec![PyValue::Float(1.5)]),
            PyValue::Dict(vec![(PyValue::str("a"), PyValue::int(1))]),
        ];
        for sig in SIGNATURES.iter().filter(|s| s.kind == FnKind::Pure) {
            let r = run_pure(sig.name, "function_1", &[]);
            let want_missing = sig.params.iter().any(|p| p.default.is_none());
            assert_eq!(matches!(r, Some(Err(_))), want_missing, "{}", sig.name);
            // a valid-looking baseline of small ints, then one slot varied at a time
            for slot in 0..sig.params.len() {
                for s in &samples {
                    let kwargs: Vec<(String, PyValue)> = sig
                        .params
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            let v = if i == slot {
                                s.clone()
                            } else {
                                PyValue::int(3)
                            };
                            (p.name.to_string(), v)
                        })
                        .collect();
                    let _ = run_pure(sig.name, "function_1", &kwargs);
                }
            }
        }
        // wrong-typed arguments give errors, not panics
        assert!(run("math_factorial(n='x')").starts_with("TypeError"));
        assert!(run("mat_mul(matA='ab', matB=3)").starts_with("TypeError"));
        // resource guards instead of hangs
        assert_eq!(
            run("math_factorial(n=10**9)"),
            "MemoryError: result too large"
        );
        assert_eq!(
            run("get_fibonacci_sequence(n=10**9)"),
            "MemoryError: result too large"
        );
        assert_eq!(
            run("get_prime_factors(number=12.5)"),
            "TimeoutError: execution took too long"
        );
    }

    /// `d[key]` for a parsed JSON object.
    fn get<'a>(v: &'a PyValue, key: &str) -> Option<&'a PyValue> {
        match v {
            PyValue::Dict(d) => d
                .iter()
                .find(|(k, _)| matches!(k, PyValue::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    fn items(v: Option<&PyValue>) -> &[PyValue] {
        match v {
            Some(PyValue::List(items)) => items,
            _ => &[],
        }
    }

    fn text(v: Option<&PyValue>) -> &str {
        match v {
            Some(PyValue::Str(s)) => s,
            _ => "",
        }
    }

    fn load(path: &std::path::Path) -> Option<PyValue> {
        let t = std::fs::read_to_string(path).ok()?;
        Some(from_json_str(&t).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    }

    /// Every ground truth of exec_simple / exec_multiple whose function is pure executes,
    /// and matches the `execution_result` stored in the exec_multiple config.
    #[test]
    fn ground_truths_execute() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/data/otb/bfcl/tool_configs");
        let mut checked = 0;
        for file in [
            "executable_simple_base_config.json",
            "executable_multiple_function_base_config.json",
        ] {
            let Some(v) = load(&dir.join(file)) else {
                testkit::skip(
                    "shared",
                    format_args!("{} not present", dir.join(file).display()),
                );
                return;
            };
            for t in items(get(&v, "tests")) {
                let gt = text(items(get(t, "ground_truth")).first());
                let call = parse_call(gt).unwrap();
                let Some(result) = run_pure(&call.name, &call.name, &call.kwargs) else {
                    continue;
                };
                let got = result.unwrap_or_else(|e| panic!("{gt}: {e}"));
                if let Some(want) = items(get(t, "execution_result")).first() {
                    assert!(
                        got.py_eq(want) && same_types(&got, want),
                        "{gt}: got {got}, want {want}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 30, "only {checked} stored results compared");
    }

    /// Same Python type all the way down (JSON cannot tell a tuple from a list).
    fn same_types(a: &PyValue, b: &PyValue) -> bool {
        match (a, b) {
            (PyValue::List(x) | PyValue::Tuple(x), PyValue::List(y) | PyValue::Tuple(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_types(p, q))
            }
            (PyValue::Dict(x), PyValue::Dict(y)) => x.iter().all(|(k, v)| {
                y.iter()
                    .find(|(k2, _)| k.py_eq(k2))
                    .is_some_and(|(_, v2)| same_types(v, v2))
            }),
            _ => a.type_name() == b.type_name(),
        }
    }

    /// Replays every call of the paper's released runs (`released_runs/*/scored.json`
    /// paired with `results.json`) to a pure function: our output (or exception text,
    /// with the opaque name) must equal what the reference executor recorded.
    #[test]
    fn released_runs_replay() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/data/otb/bfcl/released_runs");
        if !root.exists() {
            testkit::skip("shared", format_args!("{} not present", root.display()));
            return;
        }
        let mut files = Vec::new();
        let mut stack = vec![root];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.to_string_lossy().ends_with("scored.json") {
                    files.push(p);
                }
            }
        }
        let (mut checked, mut failures) = (0, Vec::new());
        for scored in files {
            let name = scored.file_name().unwrap_or_default().to_string_lossy();
            let results = scored.with_file_name(name.replace("scored.json", "results.json"));
            let Ok(rtext) = std::fs::read_to_string(&results) else {
                continue;
            };
            let lines: Vec<PyValue> = rtext
                .lines()
                .filter(|l| !l.trim().is_empty())
                .filter_map(|l| from_json_str(l).ok())
                .collect();
            let Some(s) = load(&scored) else { continue };
            for ev in items(get(&s, "detailed_evaluations")) {
                let Some(line) = get(ev, "index")
                    .and_then(|i| i.as_bigint())
                    .and_then(|i| i.to_usize())
                    .and_then(|i| lines.get(i))
                else {
                    continue;
                };
                if text(get(line, "question")) != text(get(ev, "question")) {
                    continue;
                }
                let Ok(calls) = from_json_str(text(get(ev, "model_result"))) else {
                    continue;
                };
                let (calls, outs) = (items(Some(&calls)), items(get(ev, "executed_result")));
                if calls.len() != outs.len() {
                    continue;
                }
                for (c, out) in calls.iter().zip(outs) {
                    let shown = text(get(c, "function"));
                    let real = match get(line, "name_mapping") {
                        Some(PyValue::Dict(m)) => m
                            .iter()
                            .find(|(_, v)| matches!(v, PyValue::Str(s) if s == shown))
                            .map(|(k, _)| k.py_str())
                            .unwrap_or_else(|| shown.to_string()),
                        _ => shown.to_string(),
                    };
                    let Some(PyValue::Dict(args)) = get(c, "args") else {
                        continue;
                    };
                    let kwargs: Vec<(String, PyValue)> =
                        args.iter().map(|(k, v)| (k.py_str(), v.clone())).collect();
                    if !kwargs
                        .iter()
                        .all(|(k, _)| super::super::parse::is_identifier(k))
                    {
                        continue; // the reference produced a SyntaxError for these
                    }
                    let Some(got) = run_pure(&real, shown, &kwargs) else {
                        continue;
                    };
                    let is_error = matches!(out, PyValue::Dict(d) if d.len() == 2)
                        && get(out, "error").is_some()
                        && get(out, "function_call").is_some();
                    let ok = match (&got, is_error) {
                        (Err(e), true) => e.message == text(get(out, "error")),
                        (Ok(v), false) => v.py_eq(out) && same_types(v, out),
                        _ => false,
                    };
                    checked += 1;
                    if !ok {
                        failures.push(format!(
                            "{real} {shown}({kwargs:?}): got {got:?}, want {out}"
                        ));
                    }
                }
            }
        }
        failures.sort();
        failures.dedup();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(checked > 100, "only {checked} calls replayed");
    }
}
