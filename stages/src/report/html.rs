//! The page: maud templates (every value escaped), inline CSS and script, SVG charts,
//! word-level diffs (`similar`), and the items as JSON in a non-executed script
//! element whose text cannot close it. A report too large for one page is split:
//! the main page lists the cells and each cell's items go to `cells/cell-N.html`.

use super::model::{Cell, Chart, DocEdits, Intervals, Item, Report, TableText};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde::Serialize;

const CSS: &str = include_str!("assets/report.css");
const JS: &str = include_str!("assets/report.js");

/// What the page's own resources may do: nothing from outside the file (no fetch,
/// no remote image, no form), its inline style and script only.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

/// JSON safe inside `<script type="application/json">`: `<`, `>` and `&` (so no
/// `</script>` or `<!--` can appear) and the two JavaScript line separators written
/// as escapes; JSON.parse reads them back unchanged.
pub fn script_json<T: Serialize>(v: &T) -> String {
    let s = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(s.len() + s.len() / 16);
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[derive(Serialize)]
struct Data<'a> {
    cells: &'a [Cell],
    items: &'a [&'a Item],
}

fn when(unix: u64) -> String {
    match unix {
        0 => "-".into(),
        t => pipeline::clock::utc_datetime(t),
    }
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An axis tick: thousands as `12.3k`, millions as `1.2M`, small values with two
/// decimals, whole numbers without.
fn tick(v: f64, span: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if span >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{:.1}", v * 100.0))
        .unwrap_or_else(|| "-".into())
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta http-equiv="Content-Security-Policy" content=(CSP);
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) }
            style { (PreEscaped(CSS)) }
        }
    }
}

/// The item browser: filters, list and detail, with the items as JSON and the
/// script that renders them.
fn browser(cells: &[Cell], items: &[&Item]) -> Markup {
    let data = script_json(&Data { cells, items });
    html! {
        div.filters #otb-filters {}
        div."items-wrap" {
            div."item-list" #otb-items {}
            div."item-detail" #otb-detail { p.muted { "Choose an item to see its question or position, the documentation the agent saw, each model turn and the verdict." } }
        }
        script type="application/json" #otb-data { (PreEscaped(data)) }
        script { (PreEscaped(JS)) }
    }
}

/// A Markdown table text (as `otb table` prints it) as HTML: pipe rows as a table,
/// other lines as paragraphs.
fn markdown(md: &str) -> Markup {
    enum Part {
        Para(String),
        Table(Vec<Vec<String>>),
    }
    let mut parts: Vec<Part> = Vec::new();
    for line in md.lines() {
        let t = line.trim();
        if t.starts_with('|') {
            // Split on pipes that are not escaped (`\|`).
            let mut cells = Vec::new();
            let mut cur = String::new();
            let mut chars = t.trim_matches('|').chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\\' if chars.peek() == Some(&'|') => {
                        cur.push('|');
                        chars.next();
                    }
                    '|' => cells.push(std::mem::take(&mut cur).trim().to_string()),
                    c => cur.push(c),
                }
            }
            cells.push(cur.trim().to_string());
            if cells
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|x| matches!(x, '-' | ':')))
            {
                continue;
            }
            match parts.last_mut() {
                Some(Part::Table(rows)) => rows.push(cells),
                _ => parts.push(Part::Table(vec![cells])),
            }
        } else if !t.is_empty() {
            parts.push(Part::Para(t.trim_start_matches('#').trim().to_string()));
        } else {
            parts.push(Part::Para(String::new()));
        }
    }
    html! {
        @for p in &parts {
            @match p {
                Part::Para(s) => @if !s.is_empty() { p { (s) } },
                Part::Table(rows) => div.wide { table {
                    @for (i, r) in rows.iter().enumerate() {
                        tr { @for c in r { @if i == 0 { th { (c) } } @else { td { (c) } } } }
                    }
                } },
            }
        }
    }
}

/// At most `n` characters of `s` (a legend's width).
fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

const PALETTE: [&str; 8] = [
    "#2457a6", "#c62828", "#1a7f37", "#8a6d00", "#7b1fa2", "#00838f", "#ef6c00", "#455a64",
];

fn chart(c: &Chart) -> Markup {
    // Two charts side by side on a 1280-pixel-wide screen.
    let (w, h, ml, mr, mt, mb) = (580.0, 260.0, 52.0, 190.0, 40.0, 34.0);
    let pts = c.series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y, lo, hi) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(lo.unwrap_or(y)).min(y);
        y1 = y1.max(hi.unwrap_or(y)).max(y);
    }
    if x0 > x1 {
        return html! {};
    }
    if x1 - x0 < 1.0 {
        x1 = x0 + 1.0;
    }
    if y1 - y0 < 1e-9 {
        y1 = y0 + 1.0;
    }
    let pad = (y1 - y0) * 0.08;
    let (y0, y1) = (
        if y0 >= 0.0 {
            (y0 - pad).max(0.0)
        } else {
            y0 - pad
        },
        y1 + pad,
    );
    let px = |x: f64| ml + (x - x0) / (x1 - x0) * (w - ml - mr);
    let py = |y: f64| mt + (1.0 - (y - y0) / (y1 - y0)) * (h - mt - mb);
    let ticks: Vec<f64> = (0..=4)
        .map(|i| y0 + (y1 - y0) * f64::from(i) / 4.0)
        .collect();
    let xt: Vec<f64> = {
        let n = (x1 - x0).round() as i64;
        let step = (n / 10).max(1);
        (0..=n)
            .step_by(step as usize)
            .map(|i| x0 + i as f64)
            .collect()
    };
    html! {
        svg.chart width=(w) height=(h) viewBox=(format!("0 0 {w} {h}")) role="img" {
            title { (c.title) }
            text x="4" y="14" font-weight="600" { (c.title) }
            line x1=(ml) y1=(h - mb) x2=(w - mr) y2=(h - mb) stroke="#999" {}
            line x1=(ml) y1=(mt) x2=(ml) y2=(h - mb) stroke="#999" {}
            @for t in &ticks {
                line x1=(ml - 3.0) y1=(py(*t)) x2=(w - mr) y2=(py(*t)) stroke="#eee" {}
                text x=(ml - 6.0) y=(py(*t) + 4.0) text-anchor="end" { (tick(*t, y1 - y0)) }
            }
            @for t in &xt {
                text x=(px(*t)) y=(h - mb + 14.0) text-anchor="middle" { (format!("{t}")) }
            }
            text x=((ml + w - mr) / 2.0) y=(h - 4.0) text-anchor="middle" { (c.x) }
            @for (k, (name, p)) in c.series.iter().enumerate() {
                @let color = PALETTE[k % PALETTE.len()];
                polyline fill="none" stroke=(color) stroke-width="2"
                    points=(p.iter().map(|(x, y, _, _)| format!("{:.1},{:.1}", px(*x), py(*y))).collect::<Vec<_>>().join(" ")) {}
                @for (x, y, lo, hi) in p {
                    @if let (Some(lo), Some(hi)) = (lo, hi) {
                        line x1=(px(*x)) y1=(py(*lo)) x2=(px(*x)) y2=(py(*hi)) stroke=(color) stroke-opacity="0.5" {}
                    }
                    circle cx=(px(*x)) cy=(py(*y)) r="3" fill=(color) {}
                }
                rect x=(w - mr + 10.0) y=(mt + 16.0 * k as f64) width="10" height="10" fill=(color) {}
                text x=(w - mr + 24.0) y=(mt + 9.0 + 16.0 * k as f64) { (clip(name, 28)) }
            }
            text x="4" y=(mt - 10.0) { (c.y) }
        }
    }
}

fn intervals(iv: &Intervals) -> Markup {
    let row_h = 20.0;
    // Room on the left for the longest label (about 6.3 px a character at 11 px,
    // at most 70 characters shown) and on the right for `v [lo, hi] unit`.
    const LABEL_CHARS: usize = 70;
    let longest = iv
        .rows
        .iter()
        .map(|r| r.0.chars().count().min(LABEL_CHARS))
        .max()
        .unwrap_or(0);
    let ml = (longest as f64 * 6.3 + 16.0).max(120.0);
    let mr = 40.0 + 6.3 * (iv.unit.chars().count() + 24) as f64;
    let w = ml + 420.0 + mr;
    let h = 40.0 + row_h * iv.rows.len() as f64;
    let lo = iv
        .rows
        .iter()
        .map(|r| r.2.min(r.1))
        .fold(f64::MAX, f64::min);
    let hi = iv
        .rows
        .iter()
        .map(|r| r.3.max(r.1))
        .fold(f64::MIN, f64::max);
    if iv.rows.is_empty() || !lo.is_finite() || !hi.is_finite() {
        return html! {};
    }
    let span = if hi - lo < 1e-9 { 1.0 } else { hi - lo };
    let (lo, hi) = (lo - span * 0.05, hi + span * 0.05);
    let px = |v: f64| ml + (v - lo) / (hi - lo) * (w - ml - mr);
    html! {
        svg.chart width=(w) height=(h) viewBox=(format!("0 0 {w} {h}")) role="img" {
            title { (iv.title) }
            text x="4" y="14" font-weight="600" { (iv.title) }
            @for (i, (label, v, a, b)) in iv.rows.iter().enumerate() {
                @let y = 30.0 + row_h * i as f64;
                text x=(ml - 8.0) y=(y + 4.0) text-anchor="end" { (clip(label, LABEL_CHARS)) }
                line x1=(px(*a)) y1=(y) x2=(px(*b)) y2=(y) stroke="#2457a6" stroke-width="2" {}
                line x1=(px(*a)) y1=(y - 4.0) x2=(px(*a)) y2=(y + 4.0) stroke="#2457a6" {}
                line x1=(px(*b)) y1=(y - 4.0) x2=(px(*b)) y2=(y + 4.0) stroke="#2457a6" {}
                circle cx=(px(*v)) cy=(y) r="4" fill="#c62828" {}
                text x=(px(*b) + 6.0) y=(y + 4.0) { (format!("{v:.1} [{a:.1}, {b:.1}] {}", iv.unit)) }
            }
        }
    }
}

/// How long one word diff may search for the smallest edit before it settles for a
/// coarser one (still a correct diff): two long texts cost at most about this much.
pub const WORD_DIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(100);

/// `before` -> `after` word by word: removed words struck, added words marked. The
/// search is bounded by [`WORD_DIFF_TIMEOUT`] (Myers' algorithm is quadratic in the
/// worst case); the texts are capped by the report before they get here.
pub fn word_diff(before: &str, after: &str) -> Markup {
    let diff = similar::TextDiff::configure()
        .timeout(WORD_DIFF_TIMEOUT)
        .diff_words(before, after);
    // Consecutive words of one kind in one element: a description written anew is
    // one insertion, not one per word and space.
    let mut runs: Vec<(similar::ChangeTag, String)> = Vec::new();
    for op in diff.iter_all_changes() {
        match runs.last_mut() {
            Some((tag, text)) if *tag == op.tag() => text.push_str(op.value()),
            _ => runs.push((op.tag(), op.value().to_string())),
        }
    }
    html! {
        div.diff {
            @for (tag, text) in &runs {
                @match tag {
                    similar::ChangeTag::Equal => (text),
                    similar::ChangeTag::Delete => del.w { (text) },
                    similar::ChangeTag::Insert => ins.w { (text) },
                }
            }
        }
    }
}

/// Links to items (`#item=CELL:ID`), or plain ids when `cell` is `None`.
fn item_links(ids: &[String], cell: Option<usize>, page: Option<&str>) -> Markup {
    html! {
        @for id in ids {
            @match cell {
                Some(c) => { a.ids href=(item_href(c, id, page)) { (id) } " " }
                None => { span.ids { (id) } " " }
            }
        }
    }
}

/// Where an item opens: this page (`#item=...`), or its cell's page in a split report.
fn item_href(cell: usize, id: &str, page: Option<&str>) -> String {
    let enc: String = id
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect();
    format!("{}#item={cell}:{enc}", page.unwrap_or(""))
}

fn doc_edits(d: &DocEdits, cells: &[Cell]) -> Markup {
    let page = |c: usize| cells.get(c).and_then(|c| c.page.as_deref());
    html! {
        p.muted {
            (d.subjects.len()) " documentation subjects changed by ToolObserver; "
            (d.unchanged) " never changed (not listed). Each round shows what its edit removed and added."
        }
        @if !d.flips.is_empty() {
            details open[d.flips.len() <= 40] {
            summary { h3 style="display:inline" { "Items whose verdict changed after an edit (" (d.flips.len()) ")" } }
            table #otb-flips {
                tr { th { "setting" } th { "agent" } th { "editor" } th { "item" } th { "round" } th { "change" } th { "tools edited in that round" } }
                @for f in &d.flips {
                    tr.flip {
                        td { (f.setting) } td { (f.agent) } td { (f.editor) }
                        td { a.ids href=(item_href(f.cell, &f.item, page(f.cell))) { (f.item) } } td.num { (f.round) }
                        td class=(if f.direction.starts_with("wrong") { "v-right" } else { "v-wrong" }) { (f.direction) }
                        td { (f.tools.join(", ")) }
                    }
                }
            }
            }
        }
        @for s in &d.subjects {
            details.subject {
                summary {
                    (s.env) " · " (s.setting)
                    @if !s.instance.is_empty() { " · " span.ids { (s.instance) } }
                    " · agent " (s.agent)
                    @if !s.editor.is_empty() { " · editor " (s.editor) }
                    " · edited in round "
                    (edited_rounds(s))
                }
                @for t in &s.tools {
                    h4 { (t.tool) }
                    @for (k, (round, text)) in t.rounds.iter().enumerate() {
                        @if k == 0 {
                            div.muted { "round 0 (what the agent saw first)" }
                            div.diff { @if text.is_empty() { span.muted { "(no description)" } } @else { (text) } }
                        } @else {
                            div.muted { "after round " (round) }
                            (word_diff(&t.rounds[k - 1].1, text))
                        }
                    }
                    // Gold and every other method's final description (a baseline,
                    // an external method), each as a word diff against round 0.
                    @for (m, text) in &t.others {
                        div.muted { (m) " (final)" }
                        (word_diff(t.rounds.first().map_or("", |r| r.1.as_str()), text))
                    }
                }
            }
        }
    }
}

/// The rounds in which any tool of `s` changed, `1, 3`.
fn edited_rounds(s: &super::model::DocSubject) -> String {
    let mut r: Vec<i64> = s
        .tools
        .iter()
        .flat_map(|t| t.rounds.iter().skip(1).map(|(r, _)| *r))
        .collect();
    r.sort_unstable();
    r.dedup();
    r.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

fn tables(ts: &[TableText]) -> Markup {
    html! {
        @for t in ts {
            h3 { (t.name) }
            (markdown(&t.markdown))
        }
    }
}

/// Long listings, each folded under its name.
fn listings(ts: &[TableText]) -> Markup {
    html! {
        @for t in ts {
            details.listing {
                summary { (t.name) }
                (markdown(&t.markdown))
            }
        }
    }
}

fn cells_table(cells: &[Cell], link_pages: bool) -> Markup {
    html! {
        table #otb-cells {
            tr {
                th { "env" } th { "setting / tool set" } th { "method" } th { "round" } th { "split" }
                th { "agent" } th { "editor" } th { "state" } th.num { "items" } th.num { "mean score %" } th.num { "errors" }
            }
            @for c in cells {
                tr.cell data-cell=(c.id) data-items=(c.n) data-node=(c.node) {
                    td { (c.env) } td { (c.setting) } td { (c.method) } td.num { (c.round) } td { (c.split) }
                    td { (c.agent) } td { (c.editor) }
                    td { (c.state) }
                    td.num {
                        @if c.n == 0 { "0" }
                        @else if link_pages { a href=(c.page.clone().unwrap_or_default()) { (c.n) } }
                        @else { a href=(format!("#cell={}", c.id)) { (c.n) } }
                    }
                    td.num { (pct(c.mean)) }
                    td.num { (c.errors) }
                }
            }
        }
    }
}

/// The main page. With `split`, items are not embedded: each cell links to its page.
pub fn page(r: &Report, split: bool) -> String {
    let items: Vec<&Item> = if split {
        Vec::new()
    } else {
        r.items.iter().collect()
    };
    let p = &r.provenance;
    let priced = r.priced;
    let total = crate::metrics::cost::total(&r.cost);
    let dollars = total.dollars;
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(&format!("otb report: {}", r.title)))
            body {
                header {
                    h1 { "otb report: " (r.title) }
                    div.muted { "written " (when(r.written_unix)) " by " (p.version) " from the store " span.ids { (p.store) } }
                    nav {
                        a href="#tables" { "Table" } a href="#curves" { "Curves" }
                        @if !r.more_tables.is_empty() { a href="#more-tables" { "More tables" } }
                        @if !r.listings.is_empty() { a href="#listings" { "Listings" } }
                        a href="#cells" { "Cells" }
                        a href="#items" { "Items" } a href="#docs" { "Documentation edits" }
                        a href="#compare" { "Comparison" } a href="#cost" { "Cost" } a href="#provenance" { "Provenance" }
                    }
                }
                main {
                    // The first screen: the paper's table of the run, then the curves.
                    section #tables {
                        @if r.tables.is_empty() { h2 { "Tables" } p.muted { "No paper table applies to this run's cells yet." } }
                        @for t in &r.tables {
                            h2 { (t.name) }
                            (markdown(&t.markdown))
                        }
                        @for n in &r.notes { div.note { (n) } }
                    }
                    section #curves {
                        h2 { "Curves and intervals" }
                        @if r.charts.is_empty() && r.intervals.is_empty() && r.curve_notes.is_empty() { p.muted { "No curve or interval to draw yet." } }
                        @for c in &r.charts { (chart(c)) }
                        @for n in &r.curve_notes { p.muted.curve-note { (n) } }
                        @for i in &r.intervals { div { (intervals(i)) } }
                    }
                    @if !r.more_tables.is_empty() {
                        section #more-tables { h2 { "More tables" } (tables(&r.more_tables)) }
                    }
                    // Long listings come after, folded.
                    @if !r.listings.is_empty() {
                        section #listings { h2 { "Listings" } (listings(&r.listings)) }
                    }
                    section #cells {
                        h2 { "Cells (" (r.cells.len()) ")" }
                        details #otb-cells-fold {
                            summary { "Every cell of the grid (" (r.cells.len()) ")" }
                            p.muted { "Every cell of the grid with items: BFCL instances, chess games or search episodes played with one documentation. "
                                @if split { "This report is split: each cell's items are on a page of their own (the item count links to it)." }
                                @else { "The item count filters the list below." } }
                            (cells_table(&r.cells, split))
                        }
                    }
                    section #items {
                        h2 { "Items" }
                        @if r.cut.0 > 0 { div.note { (r.cut.0) " texts were longer than the report embeds; " (r.cut.1) " bytes cut in all (the store has them whole)." } }
                        @if split { p { "Open a cell's page from the table of cells." } }
                        @else {
                            details #otb-items-fold {
                                summary { "Every item (" (r.items.len()) "): filter, sort, open one" }
                                (browser(&r.cells, &items))
                            }
                        }
                    }
                    section #docs { h2 { "Documentation edits" } (doc_edits(&r.docs, &r.cells)) }
                    section #compare {
                        h2 { "Paired comparison" }
                        @if r.comparisons.is_empty() { p.muted { "Nothing to compare (give --compare METHOD_A METHOD_B, or --against EXP2.toml; by default ToolObserver against Base where both ran)." } }
                        @for c in &r.comparisons {
                            div.comparison data-a-only=(c.a_only.len()) data-b-only=(c.b_only.len()) {
                                h3 { (c.group) }
                                p {
                                    "A = " (c.a) "; B = " (c.b) ". " (c.matched) " items graded on both. "
                                    "Mean difference A − B: " (format!("{:+.1}", c.diff * 100.0)) " points, paired bootstrap 95% interval ["
                                    (format!("{:+.1}", c.ci.0 * 100.0)) ", " (format!("{:+.1}", c.ci.1 * 100.0)) "]."
                                }
                                table {
                                    tr { th { "right on A only (" span.a-only { (c.a_only.len()) } ")" } th { "right on B only (" span.b-only { (c.b_only.len()) } ")" } }
                                    tr {
                                        td { (item_links(&c.a_only, Some(c.a_cell), r.cells.get(c.a_cell).and_then(|x| x.page.as_deref()))) }
                                        td { (item_links(&c.b_only, c.b_cell, c.b_cell.and_then(|b| r.cells.get(b)).and_then(|x| x.page.as_deref()))) }
                                    }
                                }
                            }
                        }
                    }
                    section #cost {
                        h2 { "Cost" }
                        p.muted { (thousands(total.calls)) " model calls, " (thousands(total.prompt)) " prompt and " (thousands(total.completion)) " completion tokens"
                            @if priced { ", $" (format!("{dollars:.2}")) " at the given prices (models without a price count nothing)" }
                            @else { " (give --prices FILE for dollars)" } "." }
                        table {
                            tr { th { "stage" } th { "method" } th { "role" } th { "model" } th.num { "calls" } th.num { "prompt" } th.num { "completion" } th.num { "reasoning" } @if priced { th.num { "dollars" } } }
                            @for c in &r.cost {
                                tr { td { (c.stage) } td { (c.method) } td { (c.role) } td { (c.model) } td.num { (thousands(c.calls)) } td.num { (thousands(c.prompt)) } td.num { (thousands(c.completion)) } td.num { (thousands(c.reasoning)) }
                                    @if priced { td.num { (c.dollars.map(|d| format!("{d:.4}")).unwrap_or_else(|| "-".into())) } } }
                            }
                        }
                        @if !r.estimate.is_empty() {
                            h3 { "Estimate beside actual" }
                            p.muted { "The bill " code { "otb run" } " printed before it ran (" code { "otb plan" } "), for the nodes computed since: calls are exact where the protocol fixes them, else an upper bound, or for a baseline's tries the expected count (its first tries working)." }
                            table {
                                tr { th { "stage" } th { "model" } th.num { "calls estimated" } th.num { "calls made" } th.num { "tokens estimated" } th.num { "tokens used" } th.num { "seconds estimated" } th.num { "seconds taken" } }
                                @for v in &r.estimate {
                                    tr { td { (v.stage) } td { (v.model) } td.num { (thousands(v.est_calls)) } td.num { (thousands(v.calls)) } td.num { (thousands(v.est_tokens)) } td.num { (thousands(v.tokens)) }
                                        td.num { (v.est_seconds.map(|s| format!("{s:.0}")).unwrap_or_else(|| "?".into())) } td.num { (format!("{:.0}", v.seconds)) } }
                                }
                            }
                        }
                    }
                    section #provenance {
                        h2 { "Provenance" }
                        table.kv {
                            tr { td { "otb" } td { (p.version) } }
                            tr { td { "store" } td { (p.store) } }
                            @if !p.models.is_empty() { tr { td { "models" } td { pre { (p.models) } } } }
                        }
                        @if !p.switches.is_empty() {
                            h3 { "Switched from the paper's protocol" }
                            ul { @for s in &p.switches { li { (s) } } }
                        }
                        @if let Some((path, text)) = &p.experiment {
                            h3 { "Experiment file " (path) }
                            pre { (text) }
                        }
                        details {
                            summary { "Every node of the plan (" (p.nodes.len()) "), its key and when it was computed" }
                            table {
                                tr { th { "node" } th { "stage" } th { "state" } th { "key" } th { "computed" } th.num { "wall s" } th.num { "calls" } }
                                @for n in &p.nodes {
                                    tr { td { (n.node) } td { (n.stage) } td { (n.state) } td.ids { (n.key.clone().unwrap_or_default()) }
                                        td { (when(n.finished_unix)) } td.num { (format!("{:.1}", n.wall_ms as f64 / 1000.0)) } td.num { (n.calls) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    markup.into_string()
}

/// The page of one cell of a split report.
pub fn cell_page(r: &Report, cell: &Cell) -> String {
    let items: Vec<&Item> = crate::metrics::items::of_cell(&r.items, cell.id);
    let title = format!("{}: {} · {}", r.title, cell.title(), cell.agent);
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(&title))
            body {
                header {
                    h1 { (title) }
                    nav { a href="../report.html" { "back to the report" } }
                }
                main {
                    p.muted { (cell.n) " items; state " (cell.state) "; node " (cell.node) }
                    (browser(std::slice::from_ref(cell), &items))
                }
            }
        }
    }
    .into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_close_its_script_element() {
        let s = script_json(
            &serde_json::json!({"x": "</script><img src=x onerror=alert(1)>&\u{2028}"}),
        );
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('&'),
            "{s}"
        );
        assert!(
            s.contains("\\u003c/script\\u003e") && s.contains("\\u2028"),
            "{s}"
        );
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["x"], "</script><img src=x onerror=alert(1)>&\u{2028}");
    }

    #[test]
    fn diffs_mark_words_and_escape_them() {
        let d = word_diff("Adds two <b>numbers</b>.", "Adds two integers.").into_string();
        assert!(d.contains("<del class=\"w\">"), "{d}");
        assert!(d.contains("<ins class=\"w\">integers.</ins>"), "{d}");
        assert!(d.contains("&lt;b&gt;"), "{d}");
        // A run of inserted words is one element.
        let d = word_diff("", "Calculates the probability.").into_string();
        assert_eq!(
            d,
            "<div class=\"diff\"><ins class=\"w\">Calculates the probability.</ins></div>"
        );
    }

    #[test]
    fn markdown_tables_become_html_tables() {
        let h =
            markdown("Table 2\n\n| a | b\\|c |\n|---|---|\n| 1 | <x> |\n\nNote: n").into_string();
        assert!(h.contains("<th>a</th><th>b|c</th>"), "{h}");
        assert!(h.contains("<td>&lt;x&gt;</td>"), "{h}");
        assert!(h.contains("<p>Note: n</p>"), "{h}");
    }

    #[test]
    fn an_unknown_time_is_a_dash() {
        assert_eq!(when(0), "-");
        assert_eq!(when(1_764_115_200), "2025-11-26 00:00:00 UTC");
    }
}
