//! A generated shop database for PyPI `mcp-server-sqlite`, and tasks on it
//! (aggregates, joins, counts, maxima, group-bys), answered in Rust from the same
//! seeded rows.
//!
//! Four tables: `customers(id, name, city, signup_date)`, `products(id, name,
//! category, price)`, `orders(id, customer_id, order_date, status)` and
//! `order_items(id, order_id, product_id, quantity)`. The rows become a SQL script
//! (CREATE TABLE and INSERT statements, [`script`]) that `python3` runs with its
//! standard library's `sqlite3` module into `db.sqlite` (python3 is on every machine
//! the project supports). Prices are whole cents in the model and two-decimal numbers
//! in the database; money answers have two decimals.

use super::{choose, ymd, Draft, Error};
use serde_json::json;

/// The oracle's `read_query` call: `sql` with each `?` replaced by the next of
/// `params` as a literal.
fn query(sql: &str, params: &[&str]) -> serde_json::Value {
    let mut out = String::new();
    let mut params = params.iter();
    for ch in sql.chars() {
        match (ch, ch == '?') {
            (_, true) => out.push_str(&params.next().map_or("NULL".to_string(), |p| lit(p))),
            (c, false) => out.push(c),
        }
    }
    json!({"query": out})
}
use crate::rng::SplitMix64;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const FIRST: [&str; 20] = [
    "Ana", "Ben", "Clara", "David", "Eva", "Felix", "Greta", "Hugo", "Ines", "Jonas", "Kira",
    "Luca", "Maya", "Nils", "Olga", "Pablo", "Rosa", "Sami", "Tara", "Viktor",
];
const LAST: [&str; 16] = [
    "Silva", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat", "Ilves",
    "Jensen", "Kowalski", "Larsen", "Moretti", "Novak", "Petrov", "Quist",
];
const CITIES: [&str; 8] = [
    "Lyon", "Porto", "Leeds", "Graz", "Turku", "Ghent", "Bergen", "Split",
];
const CATEGORIES: [(&str, [&str; 7]); 5] = [
    (
        "tools",
        [
            "Hammer", "Wrench", "Drill", "Saw", "Pliers", "Chisel", "Level",
        ],
    ),
    (
        "garden",
        [
            "Rake",
            "Hose",
            "Shovel",
            "Planter",
            "Trowel",
            "Sprinkler",
            "Shears",
        ],
    ),
    (
        "kitchen",
        [
            "Kettle", "Skillet", "Whisk", "Grater", "Ladle", "Teapot", "Colander",
        ],
    ),
    (
        "office",
        [
            "Stapler", "Lamp", "Binder", "Desk Mat", "Notebook", "Pen Set", "Shelf",
        ],
    ),
    (
        "toys",
        [
            "Kite", "Puzzle", "Yo-Yo", "Robot", "Blocks", "Marbles", "Top",
        ],
    ),
];
const ADJECTIVES: [&str; 10] = [
    "Steel", "Compact", "Classic", "Deluxe", "Mini", "Rugged", "Bright", "Silent", "Nordic",
    "Swift",
];
/// Order statuses with their weights (of 20).
const STATUSES: [(&str, usize); 4] = [
    ("delivered", 10),
    ("shipped", 5),
    ("pending", 3),
    ("cancelled", 2),
];
/// The first order day: 2024-01-01; orders span 182 days (to 2024-06-30).
const ORDER_DAY0: i64 = 19_723;

/// A customer row.
#[derive(Debug, Clone)]
pub struct Customer {
    /// Primary key.
    pub id: usize,
    /// Full name (unique).
    pub name: String,
    /// City.
    pub city: String,
    /// `YYYY-MM-DD`.
    pub signup_date: String,
}

/// A product row.
#[derive(Debug, Clone)]
pub struct Product {
    /// Primary key.
    pub id: usize,
    /// Name (unique).
    pub name: String,
    /// Category.
    pub category: String,
    /// Price in cents (unique over all products).
    pub cents: i64,
}

/// An order row.
#[derive(Debug, Clone)]
pub struct Order {
    /// Primary key.
    pub id: usize,
    /// The customer's id.
    pub customer: usize,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// delivered, shipped, pending or cancelled.
    pub status: String,
}

/// An order item row.
#[derive(Debug, Clone)]
pub struct Item {
    /// Primary key.
    pub id: usize,
    /// The order's id.
    pub order: usize,
    /// The product's id.
    pub product: usize,
    /// Units, 1 to 5.
    pub quantity: i64,
}

/// The database's rows.
#[derive(Debug, Clone)]
pub struct Shop {
    /// Customers, ids 1..
    pub customers: Vec<Customer>,
    /// Products, ids 1..
    pub products: Vec<Product>,
    /// Orders, ids 1..
    pub orders: Vec<Order>,
    /// Order items, ids 1..
    pub items: Vec<Item>,
}

/// The seeded rows.
pub fn shop(seed: u64) -> Shop {
    let mut rng = SplitMix64::derived(seed, 0x5351_4c01);
    let mut names = BTreeSet::new();
    let mut customers = Vec::new();
    while customers.len() < 40 {
        let name = format!(
            "{} {}",
            FIRST[rng.below(FIRST.len())],
            LAST[rng.below(LAST.len())]
        );
        if !names.insert(name.clone()) {
            continue;
        }
        // A skewed choice of city, so that cities differ in size.
        let city = CITIES[rng.below(CITIES.len()).min(rng.below(CITIES.len()) + 2)];
        customers.push(Customer {
            id: customers.len() + 1,
            name,
            city: city.to_string(),
            signup_date: ymd(ORDER_DAY0 - 730 + rng.below(700) as i64),
        });
    }
    let mut products = Vec::new();
    let mut prices = BTreeSet::new();
    let mut product_names = BTreeSet::new();
    for (category, nouns) in CATEGORIES {
        for noun in choose(&mut rng, &nouns, 5) {
            let name = loop {
                let n = format!("{} {noun}", ADJECTIVES[rng.below(ADJECTIVES.len())]);
                if product_names.insert(n.clone()) {
                    break n;
                }
            };
            let cents = loop {
                let c = 250 + rng.below(19_750) as i64;
                if prices.insert(c) {
                    break c;
                }
            };
            products.push(Product {
                id: products.len() + 1,
                name,
                category: category.to_string(),
                cents,
            });
        }
    }
    // Six customers never order.
    let mut buyers: Vec<usize> = (1..=customers.len()).collect();
    rng.shuffle(&mut buyers);
    buyers.truncate(customers.len() - 6);
    let mut orders = Vec::new();
    let mut items = Vec::new();
    for id in 1..=160 {
        let mut w = rng.below(20);
        let status = STATUSES
            .iter()
            .find(|(_, k)| {
                if w < *k {
                    true
                } else {
                    w -= k;
                    false
                }
            })
            .map_or("delivered", |(s, _)| *s);
        orders.push(Order {
            id,
            customer: buyers[rng.below(buyers.len())],
            date: ymd(ORDER_DAY0 + rng.below(182) as i64),
            status: status.to_string(),
        });
        let ids: Vec<usize> = (1..=products.len()).collect();
        let k = 1 + rng.below(4);
        for product in choose(&mut rng, &ids, k) {
            items.push(Item {
                id: items.len() + 1,
                order: id,
                product,
                quantity: 1 + rng.below(5) as i64,
            });
        }
    }
    Shop {
        customers,
        products,
        orders,
        items,
    }
}

/// Cents as dollars with two decimals.
pub fn dollars(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// A SQL string literal.
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The SQL script that makes the database.
pub fn script(s: &Shop) -> String {
    let mut out = String::from(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, signup_date TEXT NOT NULL);\n\
         CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL);\n\
         CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), order_date TEXT NOT NULL, status TEXT NOT NULL);\n\
         CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id), product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL);\n",
    );
    for c in &s.customers {
        out.push_str(&format!(
            "INSERT INTO customers VALUES ({}, {}, {}, {});\n",
            c.id,
            lit(&c.name),
            lit(&c.city),
            lit(&c.signup_date)
        ));
    }
    for p in &s.products {
        out.push_str(&format!(
            "INSERT INTO products VALUES ({}, {}, {}, {});\n",
            p.id,
            lit(&p.name),
            lit(&p.category),
            dollars(p.cents)
        ));
    }
    for o in &s.orders {
        out.push_str(&format!(
            "INSERT INTO orders VALUES ({}, {}, {}, {});\n",
            o.id,
            o.customer,
            lit(&o.date),
            lit(&o.status)
        ));
    }
    for i in &s.items {
        out.push_str(&format!(
            "INSERT INTO order_items VALUES ({}, {}, {}, {});\n",
            i.id, i.order, i.product, i.quantity
        ));
    }
    out
}

/// The Python program that runs a SQL script (stdin) into a new database (argv[1]).
const LOAD: &str = "import sqlite3, sys\n\
    con = sqlite3.connect(sys.argv[1])\n\
    con.executescript(sys.stdin.read())\n\
    con.commit()\n\
    con.close()\n";

/// Writes `dir/db.sqlite` for `seed` and returns the tasks.
pub fn generate(dir: &Path, seed: u64) -> Result<Vec<Draft>, Error> {
    let s = shop(seed);
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let db = dir.join("db.sqlite");
    let tmp = dir.join("db.sqlite.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(LOAD)
        .arg(&tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Tool(format!("running python3 (is it installed?): {e}")))?;
    let sql = script(&s);
    let wrote = child.stdin.take().map(|mut w| w.write_all(sql.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| Error::Tool(format!("running python3: {e}")))?;
    if !out.status.success() || !matches!(wrote, Some(Ok(()))) {
        return Err(Error::Tool(format!(
            "python3's sqlite3 could not write {}: {}",
            tmp.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    std::fs::rename(&tmp, &db).map_err(|e| Error::io(&db, e))?;
    Ok(tasks(&s, seed))
}

/// The one key whose value is largest, if no other ties it.
fn unique_max<K: Clone, V: PartialOrd + Copy>(m: &[(K, V)]) -> Option<K> {
    let best = m
        .iter()
        .map(|(_, v)| *v)
        .fold(None, |b: Option<V>, v| match b {
            Some(b) if b >= v => Some(b),
            _ => Some(v),
        })?;
    let mut at = m.iter().filter(|(_, v)| *v == best);
    let first = at.next()?;
    at.next().is_none().then(|| first.0.clone())
}

/// The products of category `cat`.
fn in_cat<'a>(s: &'a Shop, cat: &'a str) -> impl Iterator<Item = &'a Product> + 'a {
    s.products.iter().filter(move |p| p.category == cat)
}

/// The tasks on the rows.
fn tasks(s: &Shop, seed: u64) -> Vec<Draft> {
    let mut rng = SplitMix64::derived(seed, 0x5351_4c02);
    let mut out = Vec::new();
    let product = |id: usize| &s.products[id - 1];
    let live = |o: usize| s.orders[o - 1].status != "cancelled";
    let orders_of = |c: usize| s.orders.iter().filter(move |o| o.customer == c);
    let buyers: Vec<&Customer> = s
        .customers
        .iter()
        .filter(|c| orders_of(c.id).next().is_some())
        .collect();
    let categories: Vec<&str> = CATEGORIES.iter().map(|(c, _)| *c).collect();

    for city in choose(&mut rng, &CITIES, 4) {
        let n = s.customers.iter().filter(|c| c.city == city).count();
        out.push(
            Draft::new(
                "customers-in-city",
                format!("How many customers live in the city \"{city}\"?"),
                n.to_string(),
            )
            .call(
                "read_query",
                query("SELECT COUNT(*) FROM customers WHERE city = ?", &[city]),
            ),
        );
    }
    for c in choose(&mut rng, &buyers, 4) {
        out.push(Draft::new(
            "orders-of-customer",
            format!("How many orders has the customer \"{}\" placed?", c.name),
            orders_of(c.id).count().to_string(),
        ).call("read_query", query("SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.name = ?", &[&c.name])));
    }
    let cats = choose(&mut rng, &categories, 5);
    for cat in &cats[..3] {
        let best = in_cat(s, cat)
            .max_by_key(|p| p.cents)
            .map(|p| p.name.clone());
        if let Some(name) = best {
            out.push(Draft::new(
                "priciest-in-category",
                format!("Which product in the category \"{cat}\" has the highest price? Answer with the product's name."),
                name,
            ).call("read_query", query("SELECT name, price FROM products WHERE category = ? ORDER BY price DESC LIMIT 1", &[cat])));
        }
    }
    for cat in &cats[3..] {
        let best = in_cat(s, cat)
            .min_by_key(|p| p.cents)
            .map(|p| p.name.clone());
        if let Some(name) = best {
            out.push(Draft::new(
                "cheapest-in-category",
                format!("Which product in the category \"{cat}\" has the lowest price? Answer with the product's name."),
                name,
            ).call("read_query", query("SELECT name, price FROM products WHERE category = ? ORDER BY price ASC LIMIT 1", &[cat])));
        }
    }
    for cat in choose(&mut rng, &categories, 4) {
        let cents: i64 = s
            .items
            .iter()
            .filter(|i| product(i.product).category == cat && live(i.order))
            .map(|i| i.quantity * product(i.product).cents)
            .sum();
        out.push(Draft::new(
            "category-revenue",
            format!("What is the total revenue from products in the category \"{cat}\" (quantity times unit price, over all orders that were not cancelled)? Answer in dollars with two decimals."),
            dollars(cents),
        ).call("read_query", query("SELECT printf('%.2f', COALESCE(SUM(i.quantity * p.price), 0)) FROM order_items i JOIN products p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id WHERE p.category = ? AND o.status <> 'cancelled'", &[cat])));
    }
    for c in choose(&mut rng, &buyers, 4) {
        let cents: i64 = s
            .items
            .iter()
            .filter(|i| s.orders[i.order - 1].customer == c.id && live(i.order))
            .map(|i| i.quantity * product(i.product).cents)
            .sum();
        out.push(Draft::new(
            "customer-spend",
            format!("How much has the customer \"{}\" spent in total (quantity times unit price, over their orders that were not cancelled)? Answer in dollars with two decimals.", c.name),
            dollars(cents),
        ).call("read_query", query("SELECT printf('%.2f', COALESCE(SUM(i.quantity * p.price), 0)) FROM order_items i JOIN products p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id JOIN customers c ON c.id = o.customer_id WHERE c.name = ? AND o.status <> 'cancelled'", &[&c.name])));
    }
    let statuses: Vec<&str> = STATUSES.iter().map(|(s, _)| *s).collect();
    for st in choose(&mut rng, &statuses, 3) {
        let n = s.orders.iter().filter(|o| o.status == st).count();
        out.push(
            Draft::new(
                "status-count",
                format!("How many orders have the status \"{st}\"?"),
                n.to_string(),
            )
            .call(
                "read_query",
                query("SELECT COUNT(*) FROM orders WHERE status = ?", &[st]),
            ),
        );
    }
    let months: Vec<String> = (1..=6).map(|m| format!("2024-{m:02}")).collect();
    for m in choose(&mut rng, &months, 3) {
        let n = s.orders.iter().filter(|o| o.date.starts_with(&m)).count();
        out.push(
            Draft::new(
                "month-orders",
                format!("How many orders were placed in the month `{m}`?"),
                n.to_string(),
            )
            .call(
                "read_query",
                query(
                    "SELECT COUNT(*) FROM orders WHERE substr(order_date, 1, 7) = ?",
                    &[&m],
                ),
            ),
        );
    }
    let units = |pid: usize| -> i64 {
        s.items
            .iter()
            .filter(|i| i.product == pid)
            .map(|i| i.quantity)
            .sum()
    };
    for p in choose(&mut rng, &s.products, 4) {
        out.push(Draft::new(
            "units-sold",
            format!(
                "How many units of the product \"{}\" were sold in total, over all orders (cancelled ones included)?",
                p.name
            ),
            units(p.id).to_string(),
        ).call("read_query", query("SELECT COALESCE(SUM(i.quantity), 0) FROM order_items i JOIN products p ON p.id = i.product_id WHERE p.name = ?", &[&p.name])));
    }
    let mut best_sellers = 0;
    for cat in choose(&mut rng, &categories, 5) {
        let sold: Vec<(String, i64)> = in_cat(s, cat)
            .map(|p| (p.name.clone(), units(p.id)))
            .collect();
        if let (Some(name), true) = (unique_max(&sold), best_sellers < 3) {
            best_sellers += 1;
            out.push(Draft::new(
                "best-seller-in-category",
                format!("Which product in the category \"{cat}\" sold the most units over all orders (cancelled ones included)?"),
                name,
            ).call("read_query", query("SELECT p.name, SUM(i.quantity) AS n FROM products p JOIN order_items i ON i.product_id = p.id WHERE p.category = ? GROUP BY p.id ORDER BY n DESC LIMIT 1", &[cat])));
        }
    }
    for c in choose(&mut rng, &buyers, 3) {
        let distinct: BTreeSet<usize> = s
            .items
            .iter()
            .filter(|i| s.orders[i.order - 1].customer == c.id)
            .map(|i| i.product)
            .collect();
        out.push(Draft::new(
            "distinct-products",
            format!(
                "How many different products has the customer \"{}\" ordered?",
                c.name
            ),
            distinct.len().to_string(),
        ).call("read_query", query("SELECT COUNT(DISTINCT i.product_id) FROM order_items i JOIN orders o ON o.id = i.order_id JOIN customers c ON c.id = o.customer_id WHERE c.name = ?", &[&c.name])));
    }
    let mut per_city: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &s.customers {
        *per_city.entry(&c.city).or_default() += 1;
    }
    let per_city: Vec<(&str, usize)> = per_city.into_iter().collect();
    if let Some(city) = unique_max(&per_city) {
        out.push(Draft::new(
            "top-city",
            "Which city has the most customers?".to_string(),
            city,
        ).call("read_query", query("SELECT city, COUNT(*) AS n FROM customers GROUP BY city ORDER BY n DESC LIMIT 1", &[])));
    }
    let mut averages = 0;
    for cat in choose(&mut rng, &categories, 5) {
        let (sum, n) = in_cat(s, cat).fold((0i64, 0i64), |(s, n), p| (s + p.cents, n + 1));
        // Skip an average exactly halfway between two cents: how it rounds is not obvious.
        if n == 0 || (sum % n) * 2 == n || averages == 2 {
            continue;
        }
        averages += 1;
        let cents = (2 * sum + n) / (2 * n);
        out.push(Draft::new(
            "average-price",
            format!("What is the average price of the products in the category \"{cat}\"? Answer in dollars with two decimals."),
            dollars(cents),
        ).call("read_query", query("SELECT printf('%.2f', AVG(price)) FROM products WHERE category = ?", &[cat])));
    }
    let mut qty: BTreeMap<usize, i64> = BTreeMap::new();
    let mut value: BTreeMap<usize, i64> = BTreeMap::new();
    for i in &s.items {
        *qty.entry(i.order).or_default() += i.quantity;
        *value.entry(i.order).or_default() += i.quantity * product(i.product).cents;
    }
    if let Some(id) = unique_max(&qty.into_iter().collect::<Vec<_>>()) {
        out.push(Draft::new(
            "largest-order",
            "Which order has the largest total quantity of items? Answer with the order's id."
                .to_string(),
            id.to_string(),
        ).call("read_query", query("SELECT order_id, SUM(quantity) AS n FROM order_items GROUP BY order_id ORDER BY n DESC LIMIT 1", &[])));
    }
    if let Some(id) = unique_max(&value.into_iter().collect::<Vec<_>>()) {
        out.push(Draft::new(
            "priciest-order",
            "Which order has the highest total value (quantity times unit price)? Answer with the order's id."
                .to_string(),
            id.to_string(),
        ).call("read_query", query("SELECT i.order_id, SUM(i.quantity * p.price) AS v FROM order_items i JOIN products p ON p.id = i.product_id GROUP BY i.order_id ORDER BY v DESC LIMIT 1", &[])));
    }
    let never = s.customers.len() - buyers.len();
    out.push(
        Draft::new(
            "customers-without-orders",
            "How many customers have never placed an order?".to_string(),
            never.to_string(),
        )
        .call(
            "read_query",
            query(
                "SELECT COUNT(*) FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)",
                &[],
            ),
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_seeded_and_consistent() {
        let a = shop(0);
        assert_eq!(script(&a), script(&shop(0)));
        assert_ne!(script(&a), script(&shop(1)));
        assert_eq!(a.customers.len(), 40);
        assert_eq!(a.products.len(), 25);
        assert_eq!(a.orders.len(), 160);
        let prices: BTreeSet<i64> = a.products.iter().map(|p| p.cents).collect();
        assert_eq!(prices.len(), a.products.len());
        assert!(a.items.iter().all(|i| (1..=5).contains(&i.quantity)));
        let t = tasks(&a, 0);
        assert!(t.len() >= 35, "{}", t.len());
    }

    #[test]
    fn money_and_maxima() {
        assert_eq!(dollars(123_456), "1234.56");
        assert_eq!(dollars(5), "0.05");
        assert_eq!(lit("O'Hara"), "'O''Hara'");
        assert_eq!(unique_max(&[("a", 1), ("b", 3), ("c", 2)]), Some("b"));
        assert_eq!(unique_max(&[("a", 3), ("b", 3)]), None);
        assert_eq!(unique_max::<&str, i32>(&[]), None);
    }
}
