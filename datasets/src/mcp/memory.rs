//! A generated knowledge graph for npm `@modelcontextprotocol/server-memory`, and tasks
//! that query it (relations, observations, two hops, counts) or first change it and
//! then query it (add a person, an observation or a relation, delete an entity). Each
//! answer is computed from the graph, plus the change the task itself states.
//!
//! The file is the server's own format (`MEMORY_FILE_PATH`, as version 2026.8.31
//! reads and writes it): one JSON object a line, the entities
//! (`{"type":"entity","name":...,"entityType":...,"observations":[...]}`) before the
//! relations (`{"type":"relation","from":...,"to":...,"relationType":...}`), lines
//! joined by `\n` without a final newline, as the server saves it.

use super::{choose, write_file, Draft, Error};
use serde_json::json;

/// The oracle's `open_nodes` arguments: the named entities (and the relations
/// between them).
fn open<S: AsRef<str>>(names: &[S]) -> serde_json::Value {
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    json!({"names": names})
}
use crate::rng::SplitMix64;
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::Path;

const COMPANIES: [(&str, &str); 6] = [
    ("Helix Labs", "biotech"),
    ("Northwind Analytics", "consulting"),
    ("Quarry Robotics", "manufacturing"),
    ("Bluefin Media", "publishing"),
    ("Cedar Health", "healthcare"),
    ("Orbit Freight", "logistics"),
];
const CITIES: [(&str, &str); 6] = [
    ("Lisbon", "Portugal"),
    ("Oslo", "Norway"),
    ("Krakow", "Poland"),
    ("Dublin", "Ireland"),
    ("Tallinn", "Estonia"),
    ("Valencia", "Spain"),
];
const FIRST: [&str; 12] = [
    "Aino", "Bram", "Celia", "Dario", "Elif", "Finn", "Gaia", "Henrik", "Isla", "Joao", "Katya",
    "Lior",
];
const LAST: [&str; 10] = [
    "Aalto",
    "Brandt",
    "Cruz",
    "Dahl",
    "Esposito",
    "Fonseca",
    "Gallo",
    "Holm",
    "Ibsen",
    "Jovanovic",
];
const TITLES: [&str; 8] = [
    "data engineer",
    "product manager",
    "designer",
    "site reliability engineer",
    "research scientist",
    "account manager",
    "backend developer",
    "technical writer",
];
const LANGUAGES: [&str; 8] = [
    "English",
    "Portuguese",
    "Norwegian",
    "Polish",
    "Spanish",
    "German",
    "Italian",
    "Japanese",
];
const PROJECTS: [&str; 8] = [
    "Project Aurora",
    "Project Basalt",
    "Project Cirrus",
    "Project Drift",
    "Project Echo",
    "Project Fable",
    "Project Gale",
    "Project Halo",
];
const PROJECT_STATUS: [&str; 3] = ["active", "paused", "done"];

/// An entity line of the server's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entity {
    #[serde(rename = "type")]
    kind: &'static str,
    /// Unique name.
    pub name: String,
    /// person, company, city or project.
    #[serde(rename = "entityType")]
    pub entity_type: String,
    /// Observations, in order.
    pub observations: Vec<String>,
}

/// A relation line of the server's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Relation {
    #[serde(rename = "type")]
    kind: &'static str,
    /// The entity it starts at.
    pub from: String,
    /// The entity it ends at.
    pub to: String,
    /// works_at, lives_in, located_in, manages, leads, sponsored_by or knows.
    #[serde(rename = "relationType")]
    pub relation_type: String,
}

/// The knowledge graph.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Graph {
    /// Entities in file order.
    pub entities: Vec<Entity>,
    /// Relations in file order.
    pub relations: Vec<Relation>,
}

impl Graph {
    fn entity(&mut self, name: &str, entity_type: &str, observations: Vec<String>) {
        self.entities.push(Entity {
            kind: "entity",
            name: name.to_string(),
            entity_type: entity_type.to_string(),
            observations,
        });
    }

    fn relation(&mut self, from: &str, relation_type: &str, to: &str) {
        self.relations.push(Relation {
            kind: "relation",
            from: from.to_string(),
            to: to.to_string(),
            relation_type: relation_type.to_string(),
        });
    }

    /// The targets of `from`'s relations of type `t`.
    pub fn targets(&self, from: &str, t: &str) -> Vec<&str> {
        self.relations
            .iter()
            .filter(|r| r.from == from && r.relation_type == t)
            .map(|r| r.to.as_str())
            .collect()
    }

    /// The sources of relations of type `t` that end at `to`.
    pub fn sources(&self, to: &str, t: &str) -> Vec<&str> {
        self.relations
            .iter()
            .filter(|r| r.to == to && r.relation_type == t)
            .map(|r| r.from.as_str())
            .collect()
    }

    /// The entity named `name`.
    pub fn get(&self, name: &str) -> Option<&Entity> {
        self.entities.iter().find(|e| e.name == name)
    }

    /// The file's text: one JSON object a line, without a final newline.
    pub fn jsonl(&self) -> String {
        let lines: Vec<String> = self
            .entities
            .iter()
            .map(|e| serde_json::to_string(e).unwrap_or_default())
            .chain(
                self.relations
                    .iter()
                    .map(|r| serde_json::to_string(r).unwrap_or_default()),
            )
            .collect();
        lines.join("\n")
    }
}

/// The seeded graph.
pub fn graph(seed: u64) -> Graph {
    let mut rng = SplitMix64::derived(seed, 0x6d65_6d01);
    let mut g = Graph::default();
    let companies = choose(&mut rng, &COMPANIES, 4);
    let cities = choose(&mut rng, &CITIES, 5);
    for (c, industry) in &companies {
        let year = 1990 + rng.below(31);
        g.entity(
            c,
            "company",
            vec![
                format!("Founded in {year}"),
                format!("Industry: {industry}"),
            ],
        );
    }
    for (c, country) in &cities {
        g.entity(c, "city", vec![format!("Country: {country}")]);
    }
    let mut names = BTreeSet::new();
    let mut people = Vec::new();
    while people.len() < 14 {
        let n = format!(
            "{} {}",
            FIRST[rng.below(FIRST.len())],
            LAST[rng.below(LAST.len())]
        );
        if names.insert(n.clone()) {
            people.push(n);
        }
    }
    for p in &people {
        let mut obs = vec![
            format!("Job title: {}", TITLES[rng.below(TITLES.len())]),
            format!("Joined in {}", 2010 + rng.below(15)),
        ];
        let k = 1 + rng.below(2);
        for lang in choose(&mut rng, &LANGUAGES, k) {
            obs.push(format!("Speaks {lang}"));
        }
        g.entity(p, "person", obs);
    }
    let projects = choose(&mut rng, &PROJECTS, 6);
    for p in &projects {
        g.entity(
            p,
            "project",
            vec![
                format!(
                    "Status: {}",
                    PROJECT_STATUS[rng.below(PROJECT_STATUS.len())]
                ),
                format!("Started in {}", 2018 + rng.below(7)),
            ],
        );
    }
    for (c, _) in &companies {
        let (city, _) = cities[rng.below(cities.len())];
        g.relation(c, "located_in", city);
    }
    let mut staff: Vec<Vec<&str>> = vec![Vec::new(); companies.len()];
    for p in &people {
        let at = rng.below(companies.len());
        staff[at].push(p);
        g.relation(p, "works_at", companies[at].0);
        let (city, _) = cities[rng.below(cities.len())];
        g.relation(p, "lives_in", city);
    }
    for members in &staff {
        if let Some((head, rest)) = members.split_first() {
            for p in rest {
                if rng.below(5) < 4 {
                    g.relation(head, "manages", p);
                }
            }
        }
    }
    for p in &projects {
        let lead = &people[rng.below(people.len())];
        g.relation(lead, "leads", p);
        let (c, _) = companies[rng.below(companies.len())];
        g.relation(p, "sponsored_by", c);
    }
    let mut known = BTreeSet::new();
    while known.len() < 5 {
        let a = rng.below(people.len());
        let b = rng.below(people.len());
        if a != b && known.insert((a, b)) {
            g.relation(&people[a], "knows", &people[b]);
        }
    }
    g
}

/// Writes `dir/memory.jsonl` for `seed` and returns the tasks.
pub fn generate(dir: &Path, seed: u64) -> Result<Vec<Draft>, Error> {
    let g = graph(seed);
    write_file(&dir.join("memory.jsonl"), g.jsonl().as_bytes())?;
    Ok(tasks(&g, seed))
}

/// The tasks on graph `g`.
fn tasks(g: &Graph, seed: u64) -> Vec<Draft> {
    let mut rng = SplitMix64::derived(seed, 0x6d65_6d02);
    let mut out = Vec::new();
    let of_type = |t: &str| -> Vec<String> {
        g.entities
            .iter()
            .filter(|e| e.entity_type == t)
            .map(|e| e.name.clone())
            .collect()
    };
    let people = of_type("person");
    let companies = of_type("company");
    let projects = of_type("project");
    let observation = |name: &str, prefix: &str| -> Option<String> {
        g.get(name)?
            .observations
            .iter()
            .find_map(|o| o.strip_prefix(prefix).map(str::to_string))
    };
    let employer = |p: &str| g.targets(p, "works_at").first().map(|c| c.to_string());

    for p in choose(&mut rng, &people, 5) {
        if let Some(c) = employer(&p) {
            out.push(
                Draft::new(
                    "works-at",
                    format!(
                    "According to the knowledge graph, which organization does \"{p}\" work at?"
                ),
                    c.clone(),
                )
                .call("open_nodes", open(&[p.as_str(), c.as_str()])),
            );
        }
    }
    for p in choose(&mut rng, &people, 5) {
        if let Some(t) = observation(&p, "Job title: ") {
            out.push(
                Draft::new(
                    "job-title",
                    format!("What is the job title of \"{p}\" in the knowledge graph?"),
                    t,
                )
                .call("open_nodes", open(&[&p])),
            );
        }
    }
    for p in choose(&mut rng, &people, 3) {
        let c = employer(&p).unwrap_or_default();
        let city = g.targets(&c, "located_in").first().map(|s| s.to_string());
        if let Some(city) = city {
            out.push(
                Draft::new(
                    "company-city",
                    format!("In which city is the company that \"{p}\" works at located?"),
                    city.clone(),
                )
                .call("open_nodes", open(&[p.as_str(), c.as_str(), city.as_str()])),
            );
        }
    }
    let managed: Vec<String> = people
        .iter()
        .filter(|p| g.sources(p, "manages").len() == 1)
        .cloned()
        .collect();
    for p in choose(&mut rng, &managed, 4) {
        let m = g.sources(&p, "manages")[0].to_string();
        out.push(
            Draft::new(
                "manager",
                format!("Who manages \"{p}\" according to the knowledge graph?"),
                m.clone(),
            )
            .call("open_nodes", open(&[p.as_str(), m.as_str()])),
        );
    }
    for proj in choose(&mut rng, &projects, 4) {
        if let Some(lead) = g.sources(&proj, "leads").first() {
            out.push(
                Draft::new(
                    "project-lead",
                    format!("Who leads the project \"{proj}\"?"),
                    *lead,
                )
                .call("open_nodes", open(&[proj.as_str(), lead])),
            );
        }
    }
    for c in choose(&mut rng, &companies, 3) {
        out.push(
            Draft::new(
                "headcount",
                format!("How many people in the knowledge graph work at \"{c}\"?"),
                g.sources(&c, "works_at").len().to_string(),
            )
            .call(
                "open_nodes",
                open(&[&[c.as_str()], g.sources(&c, "works_at").as_slice()].concat()),
            ),
        );
    }
    for t in choose(&mut rng, &["person", "company", "city", "project"], 2) {
        out.push(
            Draft::new(
                "count-type",
                format!("How many entities of type `{t}` does the knowledge graph hold?"),
                of_type(t).len().to_string(),
            )
            .call("open_nodes", open(&of_type(t))),
        );
    }
    for c in choose(&mut rng, &companies, 2) {
        if let Some(y) = observation(&c, "Founded in ") {
            out.push(
                Draft::new(
                    "founded",
                    format!("In which year was \"{c}\" founded, according to the knowledge graph?"),
                    y,
                )
                .call("open_nodes", open(&[&c])),
            );
        }
    }
    let managers: Vec<String> = people
        .iter()
        .filter(|p| !g.targets(p, "manages").is_empty())
        .cloned()
        .collect();
    for p in choose(&mut rng, &managers, 2) {
        out.push(
            Draft::new(
                "reports",
                format!("How many people does \"{p}\" manage according to the knowledge graph?"),
                g.targets(&p, "manages").len().to_string(),
            )
            .call(
                "open_nodes",
                open(&[&[p.as_str()], g.targets(&p, "manages").as_slice()].concat()),
            ),
        );
    }
    for proj in choose(&mut rng, &projects, 2) {
        if let Some(c) = g.targets(&proj, "sponsored_by").first() {
            out.push(
                Draft::new(
                    "sponsor",
                    format!("Which company sponsors the project \"{proj}\"?"),
                    *c,
                )
                .call("open_nodes", open(&[proj.as_str(), c])),
            );
        }
    }

    // Change, then query: the answer is the graph's plus the stated change.
    let newcomers: Vec<String> = FIRST
        .iter()
        .flat_map(|f| LAST.iter().map(move |l| format!("{f} {l}")))
        .filter(|n| g.get(n).is_none())
        .collect();
    let news = choose(&mut rng, &newcomers, 3);
    for (new, c) in news.iter().zip(choose(&mut rng, &companies, 3)) {
        out.push(Draft::new(
            "build-works-at",
            format!("Add a new person named \"{new}\" to the knowledge graph, working at \"{c}\" (a `works_at` relation from the person to the company). Then: how many people in the graph work at \"{c}\"?"),
            (g.sources(&c, "works_at").len() + 1).to_string(),
        )
        .call("create_entities", json!({"entities": [{"name": new, "entityType": "person", "observations": []}]}))
        .call("create_relations", json!({"relations": [{"from": new, "to": c, "relationType": "works_at"}]}))
        .call("open_nodes", open(&[&[c.as_str(), new.as_str()], g.sources(&c, "works_at").as_slice()].concat())));
    }
    for p in choose(&mut rng, &people, 3) {
        let Some(e) = g.get(&p) else { continue };
        let spoken: Vec<&str> = LANGUAGES
            .iter()
            .copied()
            .filter(|l| !e.observations.contains(&format!("Speaks {l}")))
            .collect();
        let lang = spoken[rng.below(spoken.len())];
        out.push(Draft::new(
            "build-observation",
            format!("Add the observation \"Speaks {lang}\" to \"{p}\" in the knowledge graph. Then: how many observations does \"{p}\" have?"),
            (e.observations.len() + 1).to_string(),
        )
        .call("add_observations", json!({"observations": [{"entityName": p, "contents": [format!("Speaks {lang}")]}]}))
        .call("open_nodes", open(&[&p])));
    }
    let mut pairs = Vec::new();
    for a in &people {
        for b in &people {
            if a != b && !g.targets(a, "manages").contains(&b.as_str()) {
                pairs.push((a.clone(), b.clone()));
            }
        }
    }
    for (a, b) in choose(&mut rng, &pairs, 2) {
        out.push(Draft::new(
            "build-manages",
            format!("Record in the knowledge graph that \"{a}\" manages \"{b}\" (a `manages` relation). Then: how many people does \"{a}\" manage?"),
            (g.targets(&a, "manages").len() + 1).to_string(),
        )
        .call("create_relations", json!({"relations": [{"from": a, "to": b, "relationType": "manages"}]}))
        .call("open_nodes", open(&[&[a.as_str(), b.as_str()], g.targets(&a, "manages").as_slice()].concat())));
    }
    for p in choose(&mut rng, &people, 2) {
        if let Some(c) = employer(&p) {
            out.push(Draft::new(
                "build-delete",
                format!("Delete the entity \"{p}\" from the knowledge graph. Then: how many people in the graph work at \"{c}\"?"),
                (g.sources(&c, "works_at").len() - 1).to_string(),
            )
            .call("delete_entities", json!({"entityNames": [p]}))
            .call("open_nodes", open(&[&[c.as_str()], g.sources(&c, "works_at").as_slice()].concat())));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_the_servers_format() {
        let mut g = Graph::default();
        g.entity("A b", "person", vec!["Speaks English".into()]);
        g.entity("C", "company", vec![]);
        g.relation("A b", "works_at", "C");
        assert_eq!(
            g.jsonl(),
            "{\"type\":\"entity\",\"name\":\"A b\",\"entityType\":\"person\",\"observations\":[\"Speaks English\"]}\n\
             {\"type\":\"entity\",\"name\":\"C\",\"entityType\":\"company\",\"observations\":[]}\n\
             {\"type\":\"relation\",\"from\":\"A b\",\"to\":\"C\",\"relationType\":\"works_at\"}"
        );
    }

    #[test]
    fn the_graph_is_seeded_and_its_names_unique() {
        let a = graph(0);
        assert_eq!(a, graph(0));
        assert_ne!(a, graph(1));
        let names: BTreeSet<&String> = a.entities.iter().map(|e| &e.name).collect();
        assert_eq!(names.len(), a.entities.len());
        assert!(a
            .relations
            .iter()
            .all(|r| names.contains(&r.from) && names.contains(&r.to)));
        let t = tasks(&a, 0);
        assert!(t.len() >= 35, "{}", t.len());
    }
}
