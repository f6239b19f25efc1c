//! The 21 decoy functions of `exec_multiple` (`../shared/spec/bfcl-opaque.md`, "Data").
//!
//! They appear only as documentation beside the real function of an instance: BFCL has
//! no implementation for them and no ground truth uses them. The reference grader gave
//! each a simple implementation so that calling one returns a plausible *wrong* value
//! rather than a `NameError`; this module does the same. Each body is a few lines of
//! "obvious" Python, executed here with Python semantics (int/float arithmetic through
//! [`binop`], CPython's error texts), deterministically: `generate_random_number` draws
//! from a hash of its arguments, the movie decoys read the simulated OMDb of
//! [`super::rest`].
//!
//! Binding (missing / unexpected keyword errors) is the executor's job; a call that
//! arrives unbound still gets a `TypeError` rather than a panic, and so do wrongly typed
//! arguments.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{Signed, ToPrimitive, Zero};
use sha2::{Digest, Sha256};

use super::python::exception::PyException;
use super::python::value::{binop, BinOp, PyValue};
use super::rest::find_movie;

/// The decoy functions, by real name.
pub const DECOY_FUNCTIONS: [&str; 21] = [
    "adjust_for_inflation",
    "apply_discount",
    "calculate_basal_metabolic_rate",
    "calculate_daily_energy_expenditure",
    "calculate_intercept",
    "calculate_interest_rate",
    "calculate_slope",
    "calculate_total",
    "calculate_total_price",
    "compound_interest",
    "confirm_booking",
    "convert_binary_to_decimal",
    "convert_coordinates",
    "convert_decimal_to_hex",
    "convert_temperature",
    "generate_random_number",
    "get_director_by_movie_name",
    "get_movie_genre",
    "inflation_adjustment",
    "predict_value",
    "validate_polygon",
];

/// Whether `real_name` is one of the [`DECOY_FUNCTIONS`].
pub fn is_decoy(real_name: &str) -> bool {
    DECOY_FUNCTIONS.contains(&real_name)
}

type PyResult = Result<PyValue, PyException>;

/// Executes a decoy with already-bound keyword arguments; `None` if `real_name` is not
/// a decoy.
pub fn call_decoy(real_name: &str, kwargs: &[(String, PyValue)]) -> Option<PyResult> {
    let a = Args {
        func: real_name,
        kwargs,
    };
    Some(match real_name {
        "adjust_for_inflation" => adjust_for_inflation(&a),
        "apply_discount" => apply_discount(&a),
        "calculate_basal_metabolic_rate" => basal_metabolic_rate(&a),
        "calculate_daily_energy_expenditure" => daily_energy_expenditure(&a),
        "calculate_intercept" => intercept(&a),
        "calculate_interest_rate" => interest_rate(&a),
        "calculate_slope" => slope(&a),
        "calculate_total" => total(&a),
        "calculate_total_price" => total_price(&a),
        "compound_interest" => compound_interest(&a),
        "confirm_booking" => confirm_booking(&a),
        "convert_binary_to_decimal" => binary_to_decimal(&a),
        "convert_coordinates" => convert_coordinates(&a),
        "convert_decimal_to_hex" => decimal_to_hex(&a),
        "convert_temperature" => convert_temperature(&a),
        "generate_random_number" => random_number(&a),
        "get_director_by_movie_name" => movie_decoy(&a, |m| m.director),
        "get_movie_genre" => movie_decoy(&a, |m| m.genre),
        "inflation_adjustment" => inflation_adjustment(&a),
        "predict_value" => predict_value(&a),
        "validate_polygon" => validate_polygon(&a),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------
// the decoys (the Python each one runs is in its doc line)
// ---------------------------------------------------------------------------------------

/// `for r in inflation_rates: investment_value = investment_value / (1 + r)`
fn adjust_for_inflation(a: &Args) -> PyResult {
    let mut value = a.req("investment_value")?.clone();
    for rate in iterate(a.req("inflation_rates")?)? {
        value = div(&value, &add(&int(1), &rate)?)?;
    }
    Ok(value)
}

/// `total * (1 - discount / 100)`
fn apply_discount(a: &Args) -> PyResult {
    let pct = div(a.req("discount")?, &int(100))?;
    mul(a.req("total")?, &sub(&int(1), &pct)?)
}

/// Harris-Benedict BMR: `88.362 + 13.397*w + 4.799*h - 5.677*a` for `"male"`, else
/// `447.593 + 9.247*w + 3.098*h - 4.330*a`.
fn basal_metabolic_rate(a: &Args) -> PyResult {
    let (w, h, age) = (a.req("weight")?, a.req("height")?, a.req("age")?);
    let male = a.req("gender")?.py_eq(&PyValue::str("male"));
    let k = if male {
        [88.362, 13.397, 4.799, 5.677]
    } else {
        [447.593, 9.247, 3.098, 4.330]
    };
    let v = add(&float(k[0]), &mul(&float(k[1]), w)?)?;
    let v = add(&v, &mul(&float(k[2]), h)?)?;
    sub(&v, &mul(&float(k[3]), age)?)
}

/// `basal_metabolic_rate * [1.2, 1.375, 1.55, 1.725, 1.9][activity_level - 1]`
fn daily_energy_expenditure(a: &Args) -> PyResult {
    let bmr = a.req("basal_metabolic_rate")?;
    let idx = sub(a.req("activity_level")?, &int(1))?;
    let factors = PyValue::List([1.2, 1.375, 1.55, 1.725, 1.9].map(float).to_vec());
    mul(bmr, &index(&factors, &idx)?)
}

/// `(sum(y) - slope * sum(x)) / len(x)`
fn intercept(a: &Args) -> PyResult {
    let (x, y) = (a.req("x")?, a.req("y")?);
    let num = sub(
        &sum(&iterate(y)?)?,
        &mul(a.req("slope")?, &sum(&iterate(x)?)?)?,
    )?;
    div(&num, &int(len(x)? as i64))
}

/// `principal * rate * time` (simple interest)
fn interest_rate(a: &Args) -> PyResult {
    let pr = mul(a.req("principal")?, a.req("rate")?)?;
    mul(&pr, a.req("time")?)
}

/// Least squares: `(n*sum_xy - sum_x*sum_y) / (n*sum_x2 - sum_x**2)` with
/// `sum_xy = sum(x[i]*y[i] for i in range(n))`, `sum_x2 = sum(xi**2 for xi in x)`.
fn slope(a: &Args) -> PyResult {
    let (x, y) = (a.req("x")?, a.req("y")?);
    let n = int(len(x)? as i64);
    let xs = iterate(x)?;
    let sum_x = sum(&xs)?;
    let sum_y = sum(&iterate(y)?)?;
    let mut products = Vec::with_capacity(xs.len());
    for (i, xi) in xs.iter().enumerate() {
        products.push(mul(xi, &index(y, &int(i as i64))?)?);
    }
    let sum_xy = sum(&products)?;
    let squares = xs
        .iter()
        .map(|xi| binop(BinOp::Pow, xi, &int(2)))
        .collect::<Result<Vec<_>, _>>()?;
    let sum_x2 = sum(&squares)?;
    let num = sub(&mul(&n, &sum_xy)?, &mul(&sum_x, &sum_y)?)?;
    let den = sub(&mul(&n, &sum_x2)?, &binop(BinOp::Pow, &sum_x, &int(2))?)?;
    div(&num, &den)
}

/// `sum(q * p for q, p in zip(quantities, prices))`
fn total(a: &Args) -> PyResult {
    let qs = iterate(a.req("quantities")?).map_err(|_| zip_error(1))?;
    let ps = iterate(a.req("prices")?).map_err(|_| zip_error(2))?;
    let products = qs
        .iter()
        .zip(&ps)
        .map(|(q, p)| mul(q, p))
        .collect::<Result<Vec<_>, _>>()?;
    sum(&products)
}

/// `room_price * nights - discount` (`discount=0`)
fn total_price(a: &Args) -> PyResult {
    let zero = int(0);
    let discount = a.get("discount").unwrap_or(&zero);
    sub(&mul(a.req("room_price")?, a.req("nights")?)?, discount)
}

/// `principal * (1 + rate / times_compounded) ** (times_compounded * years)`
fn compound_interest(a: &Args) -> PyResult {
    let n = a.req("times_compounded")?;
    let growth = add(&int(1), &div(a.req("rate")?, n)?)?;
    let periods = mul(n, a.req("years")?)?;
    mul(a.req("principal")?, &binop(BinOp::Pow, &growth, &periods)?)
}

/// `f"Booking confirmed for customer {customer_id}: room {room_number}, total price
/// {total_price}."`
fn confirm_booking(a: &Args) -> PyResult {
    Ok(PyValue::Str(format!(
        "Booking confirmed for customer {}: room {}, total price {}.",
        a.req("customer_id")?.py_str(),
        a.req("room_number")?.py_str(),
        a.req("total_price")?.py_str()
    )))
}

/// `int(binary, 2)`
fn binary_to_decimal(a: &Args) -> PyResult {
    match a.req("binary")? {
        PyValue::Str(s) => parse_base2(s).map(PyValue::Int).ok_or_else(|| {
            PyException::new(
                "ValueError",
                format!(
                    "invalid literal for int() with base 2: {}",
                    PyValue::str(s).repr()
                ),
            )
        }),
        _ => Err(PyException::new(
            "TypeError",
            "int() can't convert non-string with explicit base",
        )),
    }
}

/// `[list(c) for c in coordinates]`
fn convert_coordinates(a: &Args) -> PyResult {
    let out = iterate(a.req("coordinates")?)?
        .iter()
        .map(|c| iterate(c).map(PyValue::List))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PyValue::List(out))
}

/// `hex(decimal)`
fn decimal_to_hex(a: &Args) -> PyResult {
    let v = a.req("decimal")?;
    let n = v.as_bigint().ok_or_else(|| not_an_integer(v))?;
    let digits = n.magnitude().to_str_radix(16);
    Ok(PyValue::Str(if n.is_negative() {
        format!("-0x{digits}")
    } else {
        format!("0x{digits}")
    }))
}

/// Celsius <-> Fahrenheit on `unit.lower()`; the same unit returns the input;
/// anything else raises `ValueError("Invalid temperature units")`.
fn convert_temperature(a: &Args) -> PyResult {
    let t = a.req("temperature")?;
    let from = lower(a.req("unit_from")?)?;
    let to = lower(a.req("unit_to")?)?;
    match (from.as_str(), to.as_str()) {
        (f, t2) if f == t2 => Ok(t.clone()),
        ("celsius", "fahrenheit") => add(&div(&mul(t, &int(9))?, &int(5))?, &int(32)),
        ("fahrenheit", "celsius") => div(&mul(&sub(t, &int(32))?, &int(5))?, &int(9)),
        _ => Err(PyException::new("ValueError", "Invalid temperature units")),
    }
}

/// `random.randint(min, max)`, but drawn from a hash of the arguments so the same
/// call always gives the same number.
fn random_number(a: &Args) -> PyResult {
    let (lo_v, hi_v) = (a.req("min")?, a.req("max")?);
    // randint(a, b) is randrange(a, b + 1): b + 1 is evaluated first.
    let stop_v = add(hi_v, &int(1))?;
    let lo = lo_v
        .as_bigint()
        .ok_or_else(|| PyException::new("ValueError", "non-integer arg 1 for randrange()"))?;
    let stop = stop_v
        .as_bigint()
        .ok_or_else(|| PyException::new("ValueError", "non-integer stop for randrange()"))?;
    let width = &stop - &lo;
    if width <= BigInt::zero() {
        return Err(PyException::new(
            "ValueError",
            format!("empty range for randrange() ({lo}, {stop}, {width})"),
        ));
    }
    let digest = Sha256::digest(format!("generate_random_number({lo}, {stop})").as_bytes());
    let draw = BigInt::from_bytes_be(num_bigint::Sign::Plus, &digest);
    Ok(PyValue::Int(lo + draw.mod_floor(&width)))
}

/// The simulated OMDb's field for the title, or `"N/A"` (OMDb's blank).
fn movie_decoy(a: &Args, field: fn(&super::rest::Movie) -> &'static str) -> PyResult {
    let title = a.req("movie_name")?.py_str();
    Ok(PyValue::str(find_movie(&title).map_or("N/A", field)))
}

/// `amount / (1 + inflation_rate) ** years`
fn inflation_adjustment(a: &Args) -> PyResult {
    let growth = add(&int(1), a.req("inflation_rate")?)?;
    div(
        a.req("amount")?,
        &binop(BinOp::Pow, &growth, a.req("years")?)?,
    )
}

/// `slope * x + intercept`
fn predict_value(a: &Args) -> PyResult {
    add(&mul(a.req("slope")?, a.req("x")?)?, a.req("intercept")?)
}

/// `len(vertices) >= 3 and all(len(v) == 2 for v in vertices)`
fn validate_polygon(a: &Args) -> PyResult {
    let vertices = a.req("vertices")?;
    if len(vertices)? < 3 {
        return Ok(PyValue::Bool(false));
    }
    for v in iterate(vertices)? {
        if len(&v)? != 2 {
            return Ok(PyValue::Bool(false));
        }
    }
    Ok(PyValue::Bool(true))
}

// ---------------------------------------------------------------------------------------
// Python built-ins the decoys need
// ---------------------------------------------------------------------------------------

use super::python::bind::Args;

fn int(n: i64) -> PyValue {
    PyValue::int(n)
}

fn float(x: f64) -> PyValue {
    PyValue::Float(x)
}

fn add(x: &PyValue, y: &PyValue) -> PyResult {
    binop(BinOp::Add, x, y)
}

fn sub(x: &PyValue, y: &PyValue) -> PyResult {
    binop(BinOp::Sub, x, y)
}

fn mul(x: &PyValue, y: &PyValue) -> PyResult {
    binop(BinOp::Mul, x, y)
}

fn div(x: &PyValue, y: &PyValue) -> PyResult {
    binop(BinOp::Div, x, y)
}

/// `iter(v)` materialised: list/tuple items, str characters, dict keys.
fn iterate(v: &PyValue) -> Result<Vec<PyValue>, PyException> {
    match v {
        PyValue::List(items) | PyValue::Tuple(items) => Ok(items.clone()),
        PyValue::Str(s) => Ok(s.chars().map(|c| PyValue::Str(c.to_string())).collect()),
        PyValue::Dict(entries) => Ok(entries.iter().map(|(k, _)| k.clone()).collect()),
        other => Err(PyException::new(
            "TypeError",
            format!("'{}' object is not iterable", other.type_name()),
        )),
    }
}

fn zip_error(position: usize) -> PyException {
    PyException::new(
        "TypeError",
        format!("zip argument #{position} must support iteration"),
    )
}

/// `sum(items)`: left to right from int 0.
fn sum(items: &[PyValue]) -> PyResult {
    items.iter().try_fold(int(0), |acc, x| add(&acc, x))
}

/// `len(v)`.
fn len(v: &PyValue) -> Result<usize, PyException> {
    match v {
        PyValue::List(items) | PyValue::Tuple(items) => Ok(items.len()),
        PyValue::Str(s) => Ok(s.chars().count()),
        PyValue::Dict(entries) => Ok(entries.len()),
        other => Err(PyException::new(
            "TypeError",
            format!("object of type '{}' has no len()", other.type_name()),
        )),
    }
}

/// `seq[i]` for list / tuple / str (negative indices count from the end) and dicts.
fn index(seq: &PyValue, i: &PyValue) -> PyResult {
    let (items, what): (Vec<PyValue>, &str) = match seq {
        PyValue::List(items) => (items.clone(), "list"),
        PyValue::Tuple(items) => (items.clone(), "tuple"),
        PyValue::Str(s) => (
            s.chars().map(|c| PyValue::Str(c.to_string())).collect(),
            "string",
        ),
        PyValue::Dict(entries) => {
            return entries
                .iter()
                .find(|(k, _)| k.py_eq(i))
                .map(|(_, v)| v.clone())
                .ok_or_else(|| PyException::new("KeyError", i.repr()))
        }
        other => {
            return Err(PyException::new(
                "TypeError",
                format!("'{}' object is not subscriptable", other.type_name()),
            ))
        }
    };
    let Some(n) = i.as_bigint() else {
        let msg = if what == "string" {
            format!("string indices must be integers, not '{}'", i.type_name())
        } else {
            format!(
                "{what} indices must be integers or slices, not {}",
                i.type_name()
            )
        };
        return Err(PyException::new("TypeError", msg));
    };
    let len = BigInt::from(items.len());
    let pos = if n.is_negative() { n + &len } else { n };
    pos.to_usize()
        .filter(|&p| p < items.len())
        .map(|p| items[p].clone())
        .ok_or_else(|| PyException::new("IndexError", format!("{what} index out of range")))
}

/// `v.lower()` for a str; anything else has no `lower`.
fn lower(v: &PyValue) -> Result<String, PyException> {
    match v {
        PyValue::Str(s) => Ok(s.to_lowercase()),
        other => Err(PyException::new(
            "AttributeError",
            format!("'{}' object has no attribute 'lower'", other.type_name()),
        )),
    }
}

fn not_an_integer(v: &PyValue) -> PyException {
    PyException::new(
        "TypeError",
        format!(
            "'{}' object cannot be interpreted as an integer",
            v.type_name()
        ),
    )
}

/// `int(s, 2)`: surrounding whitespace, a sign, an optional `0b` prefix, binary digits
/// with single underscores between them (also right after the prefix).
fn parse_base2(s: &str) -> Option<BigInt> {
    let t = s.trim();
    let (negative, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (prefixed, digits) = match rest.get(..2) {
        Some("0b" | "0B") => (true, &rest[2..]),
        _ => (false, rest),
    };
    let digits = if prefixed {
        digits.strip_prefix('_').unwrap_or(digits)
    } else {
        digits
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') {
        return None;
    }
    if digits.contains("__") || !digits.chars().all(|c| c == '0' || c == '1' || c == '_') {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    let n = BigInt::parse_bytes(clean.as_bytes(), 2)?;
    Some(if negative { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfcl::python::bind::kw;
    use std::path::Path;

    fn ints(xs: &[i64]) -> PyValue {
        PyValue::List(xs.iter().map(|&x| int(x)).collect())
    }

    fn floats(xs: &[f64]) -> PyValue {
        PyValue::List(xs.iter().map(|&x| float(x)).collect())
    }

    fn s(x: &str) -> PyValue {
        PyValue::str(x)
    }

    fn run(name: &str, args: &[(&str, PyValue)]) -> PyResult {
        call_decoy(name, &kw(args)).expect("a decoy")
    }

    /// A decoy, its keyword arguments and the repr CPython gives for its body.
    type Case = (&'static str, Vec<(String, PyValue)>, &'static str);

    /// Calls shaped like the instance questions that list each decoy, with the value
    /// CPython gives for the same body (repr compared, so floats are bit-exact).
    #[rustfmt::skip]
    fn ground_truth_shaped() -> Vec<Case> {
        vec![
            ("adjust_for_inflation", kw(&[("investment_value", int(1_000_000)), ("inflation_rates", floats(&[0.01, 0.04, 0.04]))]), "915402.1911066846"),
            ("apply_discount", kw(&[("total", float(210.1)), ("discount", int(15))]), "178.58499999999998"),
            ("calculate_basal_metabolic_rate", kw(&[("weight", int(59)), ("height", int(170)), ("age", int(80)), ("gender", s("female"))]), "1173.426"),
            ("calculate_daily_energy_expenditure", kw(&[("basal_metabolic_rate", float(1173.426)), ("activity_level", int(4))]), "2024.15985"),
            ("calculate_intercept", kw(&[("x", ints(&[1, 2, -3])), ("y", ints(&[4, -5, 6])), ("slope", int(2))]), "1.6666666666666667"),
            ("calculate_interest_rate", kw(&[("principal", int(1000)), ("rate", float(0.05)), ("time", int(3))]), "150.0"),
            ("calculate_slope", kw(&[("x", ints(&[1, 2, -3])), ("y", ints(&[4, -5, 6]))]), "-1.7142857142857142"),
            ("calculate_total", kw(&[("quantities", ints(&[101, 20])), ("prices", floats(&[0.1, 10.0]))]), "210.1"),
            ("calculate_total_price", kw(&[("room_price", int(1000)), ("nights", int(4))]), "4000"),
            ("compound_interest", kw(&[("principal", int(10000)), ("rate", float(0.05)), ("times_compounded", int(12)), ("years", int(5))]), "12833.586785035119"),
            ("confirm_booking", kw(&[("customer_id", s("123")), ("room_number", s("deluxe")), ("total_price", float(4000.0))]), "'Booking confirmed for customer 123: room deluxe, total price 4000.0.'"),
            ("convert_binary_to_decimal", kw(&[("binary", s("10011"))]), "19"),
            ("convert_coordinates", kw(&[("coordinates", PyValue::List(vec![PyValue::Tuple(vec![int(1), int(2)]), PyValue::Tuple(vec![int(3), int(4)])]))]), "[[1, 2], [3, 4]]"),
            ("convert_decimal_to_hex", kw(&[("decimal", int(31))]), "'0x1f'"),
            ("convert_temperature", kw(&[("temperature", float(36.6)), ("unit_from", s("Celsius")), ("unit_to", s("Fahrenheit"))]), "97.88000000000001"),
            ("generate_random_number", kw(&[("min", int(1)), ("max", int(100))]), "47"),
            ("get_director_by_movie_name", kw(&[("movie_name", s("Avatar"))]), "'James Cameron'"),
            ("get_movie_genre", kw(&[("movie_name", s("Avatar"))]), "'Action, Adventure, Fantasy'"),
            ("inflation_adjustment", kw(&[("amount", int(10000)), ("inflation_rate", float(0.03)), ("years", int(5))]), "8626.087843841638"),
            ("predict_value", kw(&[("slope", int(2)), ("intercept", int(5)), ("x", int(10))]), "25"),
            ("validate_polygon", kw(&[("vertices", PyValue::List(vec![ints(&[1, 2]), ints(&[3, 4]), ints(&[1, 4]), ints(&[3, 7])]))]), "True"),
        ]
    }

    #[test]
    fn decoys_return_plausible_values_for_ground_truth_shaped_calls() {
        let cases = ground_truth_shaped();
        let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
        assert_eq!(
            names,
            DECOY_FUNCTIONS.to_vec(),
            "one case per decoy, in order"
        );
        for (name, args, expected) in cases {
            let out = call_decoy(name, &args)
                .expect("a decoy")
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(out.repr(), expected, "{name}");
            // Deterministic.
            let again = call_decoy(name, &args).expect("a decoy").expect("ok");
            assert_eq!(again.repr(), expected, "{name} again");
        }
        assert!(call_decoy("math_gcd", &[]).is_none());
        assert!(is_decoy("predict_value") && !is_decoy("get_movie_rating"));
    }

    #[test]
    fn decoy_list_is_distinct_from_rest_functions() {
        let mut names = DECOY_FUNCTIONS.to_vec();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 21);
        assert!(DECOY_FUNCTIONS
            .iter()
            .all(|n| !super::super::rest::is_rest(n)));
    }

    /// The decoys are exactly the documented exec_multiple functions that are neither
    /// pure nor REST (`bfcl-functions.md`).
    #[test]
    fn decoys_are_the_undocumented_exec_multiple_functions() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../shared/data/otb/bfcl/tool_configs/executable_multiple_function_base_config.json",
        );
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!(
                "skipped decoys_are_the_undocumented_exec_multiple_functions: {} absent",
                path.display()
            );
            return;
        };
        const PURE: [&str; 32] = [
            "calculate_triangle_area",
            "get_distance",
            "math_factorial",
            "quadratic_roots",
            "geometry_area_circle",
            "get_prime_factors",
            "math_gcd",
            "math_lcm",
            "calculate_final_velocity",
            "calculate_displacement",
            "calculate_electrostatic_potential_energy",
            "calculate_density",
            "mat_mul",
            "calculate_mean",
            "calculate_standard_deviation",
            "calc_binomial_probability",
            "calculate_permutations",
            "get_fibonacci_sequence",
            "get_fibonacci_number",
            "estimate_derivative",
            "calculate_cosine_similarity",
            "mortgage_calculator",
            "calculate_future_value",
            "sort_array",
            "linear_regression",
            "add_binary_numbers",
            "maxPoints",
            "calculate_investment_value",
            "calculate_nutritional_needs",
            "book_room",
            "order_food",
            "polygon_area",
        ];
        let json: serde_json::Value = serde_json::from_str(&text).expect("config JSON");
        let mut found = std::collections::BTreeSet::new();
        for t in json["tests"].as_array().expect("tests") {
            for tool in t["tools"].as_array().expect("tools") {
                let name = tool["name"].as_str().expect("name");
                if !PURE.contains(&name) && !super::super::rest::is_rest(name) {
                    found.insert(name.to_string());
                }
            }
            for gt in t["ground_truth"].as_array().expect("ground truth") {
                let gt = gt.as_str().expect("call");
                assert!(
                    !DECOY_FUNCTIONS
                        .iter()
                        .any(|d| gt.starts_with(&format!("{d}("))),
                    "a decoy is never a ground truth: {gt}"
                );
            }
        }
        let mut expected: Vec<String> = DECOY_FUNCTIONS.iter().map(|s| s.to_string()).collect();
        expected.sort();
        assert_eq!(found.into_iter().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn decoys_raise_python_errors_on_bad_input() {
        let err = |name: &str, args: &[(&str, PyValue)]| {
            let e = run(name, args).unwrap_err();
            format!("{}: {}", e.kind, e.message)
        };
        assert_eq!(
            err("convert_binary_to_decimal", &[("binary", s("102"))]),
            "ValueError: invalid literal for int() with base 2: '102'"
        );
        assert_eq!(
            err("convert_binary_to_decimal", &[("binary", int(101))]),
            "TypeError: int() can't convert non-string with explicit base"
        );
        assert_eq!(
            err("convert_decimal_to_hex", &[("decimal", float(1.5))]),
            "TypeError: 'float' object cannot be interpreted as an integer"
        );
        assert_eq!(
            err(
                "calculate_daily_energy_expenditure",
                &[
                    ("basal_metabolic_rate", int(1500)),
                    ("activity_level", float(4.0))
                ]
            ),
            "TypeError: list indices must be integers or slices, not float"
        );
        assert_eq!(
            err(
                "calculate_daily_energy_expenditure",
                &[
                    ("basal_metabolic_rate", int(1500)),
                    ("activity_level", int(7))
                ]
            ),
            "IndexError: list index out of range"
        );
        assert_eq!(
            err(
                "generate_random_number",
                &[("min", int(5)), ("max", int(3))]
            ),
            "ValueError: empty range for randrange() (5, 4, -1)"
        );
        assert_eq!(
            err(
                "calculate_slope",
                &[("x", ints(&[1, 1])), ("y", ints(&[2, 3]))]
            ),
            "ZeroDivisionError: division by zero"
        );
        assert_eq!(
            err(
                "convert_temperature",
                &[
                    ("temperature", int(1)),
                    ("unit_from", s("kelvin")),
                    ("unit_to", s("celsius"))
                ]
            ),
            "ValueError: Invalid temperature units"
        );
        assert_eq!(
            err(
                "convert_temperature",
                &[
                    ("temperature", int(1)),
                    ("unit_from", int(3)),
                    ("unit_to", s("celsius"))
                ]
            ),
            "AttributeError: 'int' object has no attribute 'lower'"
        );
        assert_eq!(
            err("validate_polygon", &[("vertices", int(3))]),
            "TypeError: object of type 'int' has no len()"
        );
        assert_eq!(
            err(
                "calculate_total",
                &[("quantities", int(3)), ("prices", ints(&[1]))]
            ),
            "TypeError: zip argument #1 must support iteration"
        );
        assert_eq!(
            err("adjust_for_inflation", &[("investment_value", int(3))]),
            "TypeError: adjust_for_inflation() missing 1 required positional argument: 'inflation_rates'"
        );
        // Python semantics, not errors.
        assert_eq!(
            run("convert_binary_to_decimal", &[("binary", s(" -0b1_01 "))])
                .expect("ok")
                .repr(),
            "-5"
        );
        assert_eq!(
            run(
                "convert_decimal_to_hex",
                &[("decimal", PyValue::Bool(true))]
            )
            .expect("ok")
            .repr(),
            "'0x1'"
        );
        assert_eq!(
            run("convert_decimal_to_hex", &[("decimal", int(-255))])
                .expect("ok")
                .repr(),
            "'-0xff'"
        );
        assert_eq!(
            run("validate_polygon", &[("vertices", ints(&[1, 2]))])
                .expect("ok")
                .repr(),
            "False"
        );
        assert_eq!(
            run("get_movie_genre", &[("movie_name", s("Unknown Film"))])
                .expect("ok")
                .repr(),
            "'N/A'"
        );
        let n = run(
            "generate_random_number",
            &[("min", int(-10)), ("max", int(10))],
        )
        .expect("ok");
        let v = n.as_bigint().expect("int");
        assert!(v >= BigInt::from(-10) && v <= BigInt::from(10));
        assert_eq!(
            run(
                "convert_temperature",
                &[
                    ("temperature", float(98.6)),
                    ("unit_from", s("fahrenheit")),
                    ("unit_to", s("Celsius"))
                ]
            )
            .expect("ok")
            .repr(),
            "37.0"
        );
    }

    #[test]
    fn no_panics_on_missing_or_wrongly_typed_arguments() {
        let weird = [
            PyValue::None,
            PyValue::Bool(false),
            int(0),
            int(-1),
            PyValue::Int(
                "98765432109876543210987654321098765432109876543210"
                    .parse()
                    .expect("int"),
            ),
            float(f64::NAN),
            float(f64::INFINITY),
            float(0.0),
            s(""),
            s("abc"),
            PyValue::List(vec![]),
            PyValue::List(vec![PyValue::None, s("x"), PyValue::List(vec![])]),
            PyValue::Tuple(vec![int(1)]),
            PyValue::Dict(vec![(s("k"), int(1)), (int(2), PyValue::None)]),
        ];
        for (name, args, _) in ground_truth_shaped() {
            let e = call_decoy(name, &[]).expect("a decoy").unwrap_err();
            assert_eq!(e.kind, "TypeError", "{name}");
            for i in 0..args.len() {
                for v in &weird {
                    let mut a = args.clone();
                    a[i].1 = v.clone();
                    let _ = call_decoy(name, &a);
                }
            }
        }
    }
}
