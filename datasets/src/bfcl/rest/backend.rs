//! The REST functions' shared vocabulary: which functions are REST, the canonical call
//! string and its key, the [`RestBackend`] trait a chain asks, and [`RestFunctions`],
//! the one dispatch table from a function name to a backend's method.

use std::path::PathBuf;

use md5::{Digest as _, Md5};

use crate::bfcl::python::exception::PyException;
use crate::bfcl::python::value::PyValue;

/// The 19 REST functions, by real name.
pub const REST_FUNCTIONS: [&str; 19] = [
    "get_weather_data",
    "get_coordinates_from_city",
    "convert_currency",
    "find_term_on_urban_dictionary",
    "get_coordinate_by_ip_address",
    "get_zipcode_by_ip_address",
    "get_covid_death_by_country",
    "get_active_covid_case_by_country",
    "get_rating_by_amazon_ASIN",
    "get_price_by_amazon_ASIN",
    "get_product_name_by_amazon_ASIN",
    "get_company_name_by_stock_name",
    "get_stock_price_by_stock_name",
    "get_stock_history",
    "retrieve_city_based_on_zipcode",
    "retrieve_holiday_by_year",
    "get_time_zone_by_coord",
    "get_movie_rating",
    "get_movie_director",
];

/// Whether `real_name` is one of the [`REST_FUNCTIONS`].
pub fn is_rest(real_name: &str) -> bool {
    REST_FUNCTIONS.contains(&real_name)
}

/// The canonical Python call string: `name(k=repr(v), ...)` in the given keyword order.
pub fn canonical_call_string(real_name: &str, kwargs: &[(String, PyValue)]) -> String {
    let args: Vec<String> = kwargs
        .iter()
        .map(|(k, v)| format!("{k}={}", v.repr()))
        .collect();
    format!("{real_name}({})", args.join(", "))
}

/// The key of a call in a recorded responses file: md5 hex of the canonical call string.
pub fn call_key(real_name: &str, kwargs: &[(String, PyValue)]) -> String {
    hex::encode(Md5::digest(
        canonical_call_string(real_name, kwargs).as_bytes(),
    ))
}

/// One source of answers for REST calls.
pub trait RestBackend: Send + Sync {
    /// A short name for messages (`"recorded"`, `"simulated"`, `"live"`).
    fn name(&self) -> &str;
    /// The call's outcome: its return value or the exception it raised; `None` when this
    /// backend has no answer and the next one should be asked.
    fn call(
        &self,
        real_name: &str,
        kwargs: &[(String, PyValue)],
    ) -> Option<Result<PyValue, PyException>>;
}

/// Why a recorded responses file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// The file could not be read.
    #[error("cannot read recorded API responses {}: {source}", path.display())]
    Io {
        /// The recorded responses file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON (e.g. truncated).
    #[error(
        "recorded API responses {} are truncated or not valid JSON \
         (line {line}, column {column}): {source}",
        path.display(),
        line = source.line(),
        column = source.column()
    )]
    Json {
        /// The recorded responses file.
        path: PathBuf,
        /// The parser's error, with its line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The JSON is not an object of md5 -> `{"output": ..., "error": ...}`
    /// entries.
    #[error("recorded API responses {}: {detail}", path.display())]
    Format {
        /// The recorded responses file.
        path: PathBuf,
        /// Which part does not have the expected shape.
        detail: String,
    },
}

pub(super) type PyResult = Result<PyValue, PyException>;
pub(super) use crate::bfcl::python::bind::Args;

/// The 19 REST functions as one backend answers them (the simulated world, the live
/// APIs): a method per function, where functions that differ only in the field they
/// return share one, and [`RestFunctions::dispatch`], the one table from a function's
/// name to its method.
pub(super) trait RestFunctions {
    fn weather(&self, a: &Args) -> PyResult;
    fn city_coordinates(&self, a: &Args) -> PyResult;
    fn convert_currency(&self, a: &Args) -> PyResult;
    fn urban_dictionary(&self, a: &Args) -> PyResult;
    /// The coordinates, or with `zip` the zip code.
    fn ip_lookup(&self, a: &Args, zip: bool) -> PyResult;
    /// Total deaths, or without `deaths` the active cases.
    fn covid(&self, a: &Args, deaths: bool) -> PyResult;
    fn amazon(&self, a: &Args, field: AmazonField) -> PyResult;
    fn company_name(&self, a: &Args) -> PyResult;
    fn stock_price(&self, a: &Args) -> PyResult;
    fn stock_history(&self, a: &Args) -> PyResult;
    fn zipcode_city(&self, a: &Args) -> PyResult;
    fn holidays(&self, a: &Args) -> PyResult;
    fn time_zone(&self, a: &Args) -> PyResult;
    /// The OMDb `field` ("Rated", "Director") of a movie.
    fn movie(&self, a: &Args, field: &str) -> PyResult;

    /// Executes one REST call; `None` for a non-REST function.
    fn dispatch(&self, real_name: &str, kwargs: &[(String, PyValue)]) -> Option<PyResult> {
        let a = Args {
            func: real_name,
            kwargs,
        };
        Some(match real_name {
            "get_weather_data" => self.weather(&a),
            "get_coordinates_from_city" => self.city_coordinates(&a),
            "convert_currency" => self.convert_currency(&a),
            "find_term_on_urban_dictionary" => self.urban_dictionary(&a),
            "get_coordinate_by_ip_address" => self.ip_lookup(&a, false),
            "get_zipcode_by_ip_address" => self.ip_lookup(&a, true),
            "get_covid_death_by_country" => self.covid(&a, true),
            "get_active_covid_case_by_country" => self.covid(&a, false),
            "get_rating_by_amazon_ASIN" => self.amazon(&a, AmazonField::Rating),
            "get_price_by_amazon_ASIN" => self.amazon(&a, AmazonField::Price),
            "get_product_name_by_amazon_ASIN" => self.amazon(&a, AmazonField::Title),
            "get_company_name_by_stock_name" => self.company_name(&a),
            "get_stock_price_by_stock_name" => self.stock_price(&a),
            "get_stock_history" => self.stock_history(&a),
            "retrieve_city_based_on_zipcode" => self.zipcode_city(&a),
            "retrieve_holiday_by_year" => self.holidays(&a),
            "get_time_zone_by_coord" => self.time_zone(&a),
            "get_movie_rating" => self.movie(&a, "Rated"),
            "get_movie_director" => self.movie(&a, "Director"),
            _ => return None,
        })
    }
}

/// What `requests` puts in a query string for a param value: `None` drops the param,
/// anything else is `str(value)`.
pub(super) fn query_param(v: &PyValue) -> Option<String> {
    match v {
        PyValue::None => None,
        other => Some(other.py_str()),
    }
}

/// Python's `a, b = value` with CPython's error texts.
pub(super) fn unpack2(v: &PyValue) -> Result<(PyValue, PyValue), PyException> {
    let items: Vec<PyValue> = match v {
        PyValue::List(items) | PyValue::Tuple(items) => items.clone(),
        PyValue::Dict(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
        PyValue::Str(s) => s.chars().map(|c| PyValue::Str(c.to_string())).collect(),
        other => {
            return Err(PyException::new(
                "TypeError",
                format!("cannot unpack non-iterable {} object", other.type_name()),
            ))
        }
    };
    let n = items.len();
    let mut it = items.into_iter();
    match (it.next(), it.next(), n) {
        (Some(a), Some(b), 2) => Ok((a, b)),
        _ if n > 2 => Err(PyException::new(
            "ValueError",
            "too many values to unpack (expected 2)",
        )),
        _ => Err(PyException::new(
            "ValueError",
            format!("not enough values to unpack (expected 2, got {n})"),
        )),
    }
}

/// Which field of a product an Amazon function returns.
#[derive(Debug, Clone, Copy)]
pub(super) enum AmazonField {
    Title,
    Rating,
    Price,
}

impl AmazonField {
    /// The field's key in the API's `data` object.
    pub(super) fn api_key(self) -> &'static str {
        match self {
            AmazonField::Title => "product_title",
            AmazonField::Rating => "product_star_rating",
            AmazonField::Price => "product_price",
        }
    }
}
