//! The two tool sets of the spec, each with a gold (accurate) and an opaque
//! documentation variant, as OpenAI-style tool JSON, and their execution.
//!
//! - Phase specialists (4): in its own phase a specialist plays the strong
//!   engine's move (Elo 2400); in any other phase a uniformly random legal
//!   move (seeded).
//! - Strength gradient (3): the engine at Elo 1200, 1800 and 2400 (1200 is
//!   below Stockfish 15.1's floor: see [`Strength::nominal`]).
//!
//! Tools take no parameters: the board is the game's current position. The
//! opaque variant names them `function_1..n` (in the order above) with one
//! shared description and empty-object parameters, as the reference configs.

use serde_json::{json, Value};
use shakmaty::Chess;

use super::engine::BlockingPool;
use super::rules::{self, Phase};
use super::strength::{self, SearchMode, Strength};
use super::ChessError;
use crate::rng::SplitMix64;

/// Which tool set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolFamily {
    /// Opening, middlegame, endgame and late-endgame specialists.
    PhaseSpecialists,
    /// Elo 1200, 1800, 2400.
    StrengthGradient,
}

impl ToolFamily {
    /// Both families.
    pub const ALL: [ToolFamily; 2] = [ToolFamily::PhaseSpecialists, ToolFamily::StrengthGradient];

    /// `phase_specialists` / `strength_gradient`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolFamily::PhaseSpecialists => "phase_specialists",
            ToolFamily::StrengthGradient => "strength_gradient",
        }
    }
}

/// Which documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Docs {
    /// Descriptive names and accurate descriptions.
    Gold,
    /// `function_1..n`, one shared description.
    Opaque,
}

/// What a tool does.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    /// `strong` in `phase`, a random legal move elsewhere.
    PhaseSpecialist {
        /// The tool's phase.
        phase: Phase,
        /// How it plays in its phase.
        strong: Strength,
    },
    /// Always plays at this strength.
    Fixed {
        /// Nominal Elo (for the optimal-tool rule and the docs).
        elo: u32,
        /// How it plays.
        strength: Strength,
    },
}

/// One tool.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tool {
    /// The gold name (e.g. `opening_specialist`, `elo_1200`).
    pub gold_name: String,
    /// The gold description.
    pub gold_description: String,
    /// What it does.
    pub behaviour: Behaviour,
}

/// The shared description of the opaque tools.
pub const OPAQUE_DESCRIPTION: &str = "Looks at the current board position and returns a suggested move in standard algebraic notation. It reads the board itself, so it takes no input.";

/// The phase specialists' strong Elo.
pub const SPECIALIST_ELO: u32 = 2400;

/// The strength gradient's Elos.
pub const GRADIENT_ELOS: [u32; 3] = [1200, 1800, 2400];

/// A tool set.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSet {
    /// Which set.
    pub family: ToolFamily,
    /// The tools, in `function_1..n` order.
    pub tools: Vec<Tool>,
}

/// A tool's move.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolMove {
    /// SAN (what the tool returns and the game plays).
    pub san: String,
    /// UCI.
    pub uci: String,
    /// Whether it was a random move (off-phase specialist or a weakened
    /// engine's random share).
    pub random: bool,
}

fn piece_range(phase: Phase) -> &'static str {
    match phase {
        Phase::Opening => "28 or more pieces on the board, kings included",
        Phase::Middlegame => "16 to 27 pieces on the board, kings included",
        Phase::Endgame => "10 to 15 pieces on the board, kings included",
        Phase::LateEndgame => "fewer than 10 pieces on the board, kings included",
    }
}

impl ToolSet {
    /// The set `family` searched the default (reproducible) way.
    pub fn new(family: ToolFamily) -> ToolSet {
        ToolSet::with_search(family, SearchMode::default())
    }

    /// The set `family` with engine moves searched as `search` says.
    pub fn with_search(family: ToolFamily, search: SearchMode) -> ToolSet {
        let tools = match family {
            ToolFamily::PhaseSpecialists => Phase::ALL
                .iter()
                .map(|&phase| Tool {
                    gold_name: format!("{}_specialist", phase.as_str()),
                    gold_description: format!(
                        "{OPAQUE_DESCRIPTION} When the position is in the {} phase ({}), the move is a strong engine move (about {SPECIALIST_ELO} Elo); in any other phase it is a random legal move.",
                        phase.as_str().replace('_', " "),
                        piece_range(phase)
                    ),
                    behaviour: Behaviour::PhaseSpecialist {
                        phase,
                        strong: Strength::nominal(SPECIALIST_ELO, search),
                    },
                })
                .collect(),
            ToolFamily::StrengthGradient => GRADIENT_ELOS
                .iter()
                .map(|&elo| Tool {
                    gold_name: format!("elo_{elo}"),
                    gold_description: format!(
                        "{OPAQUE_DESCRIPTION} The move is chosen at a playing strength of about {elo} Elo."
                    ),
                    behaviour: Behaviour::Fixed {
                        elo,
                        strength: Strength::nominal(elo, search),
                    },
                })
                .collect(),
        };
        ToolSet { family, tools }
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Tool `i`'s name under `docs`.
    pub fn name(&self, i: usize, docs: Docs) -> Option<String> {
        let t = self.tools.get(i)?;
        Some(match docs {
            Docs::Gold => t.gold_name.clone(),
            Docs::Opaque => format!("function_{}", i + 1),
        })
    }

    /// All names under `docs`.
    pub fn names(&self, docs: Docs) -> Vec<String> {
        (0..self.len()).filter_map(|i| self.name(i, docs)).collect()
    }

    /// The index of the tool called `name` under `docs`.
    pub fn index_of(&self, name: &str, docs: Docs) -> Option<usize> {
        let name = name.trim();
        (0..self.len()).find(|&i| self.name(i, docs).as_deref() == Some(name))
    }

    /// The function definitions (`name`, `description`, `parameters`), as in
    /// the reference configs' `tools` lists.
    pub fn function_defs(&self, docs: Docs) -> Vec<Value> {
        self.tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let description = match docs {
                    Docs::Gold => t.gold_description.as_str(),
                    Docs::Opaque => OPAQUE_DESCRIPTION,
                };
                json!({
                    "name": self.name(i, docs),
                    "description": description,
                    "parameters": {"type": "object", "properties": {}, "required": []},
                })
            })
            .collect()
    }

    /// OpenAI-style tools: `{"type": "function", "function": {...}}`.
    pub fn openai_tools(&self, docs: Docs) -> Vec<Value> {
        self.function_defs(docs)
            .into_iter()
            .map(|f| json!({"type": "function", "function": f}))
            .collect()
    }

    /// The optimal tool for `pos`: the specialist of its phase; the strongest
    /// Elo tool.
    pub fn optimal_tool(&self, pos: &Chess) -> usize {
        let phase = Phase::of(pos);
        let mut best = (0, 0);
        for (i, t) in self.tools.iter().enumerate() {
            match t.behaviour {
                Behaviour::PhaseSpecialist { phase: p, .. } if p == phase => return i,
                Behaviour::Fixed { elo, .. } if elo > best.1 => best = (i, elo),
                _ => {}
            }
        }
        best.0
    }

    /// How tool `i` plays in `pos`, and whether that is a random move.
    pub fn strength_for(&self, i: usize, pos: &Chess) -> Option<Strength> {
        Some(match self.tools.get(i)?.behaviour {
            Behaviour::PhaseSpecialist { phase, strong } if phase == Phase::of(pos) => strong,
            Behaviour::PhaseSpecialist { .. } => Strength::random(),
            Behaviour::Fixed { strength, .. } => strength,
        })
    }

    /// Runs tool `i` on `pos`; `seed` fixes its random draws (the tool index
    /// is mixed in, so two tools with one seed draw independently).
    pub fn execute(
        &self,
        i: usize,
        pos: &Chess,
        seed: u64,
        pool: &BlockingPool,
    ) -> Result<ToolMove, ChessError> {
        let strength = self
            .strength_for(i, pos)
            .ok_or_else(|| ChessError::IllegalMove {
                fen: rules::fen(pos),
                mv: String::new(),
                reason: format!("no tool number {} in a set of {}", i + 1, self.len()),
            })?;
        let seed = SplitMix64::derived(seed, i as u64 + 1).next_u64();
        let random = strength.random_share >= 1.0
            || (strength.random_share > 0.0
                && SplitMix64::new(seed).next_f64() < strength.random_share);
        let m = if strength.random_share >= 1.0 {
            strength::random_move(pos, &mut SplitMix64::new(seed))
                .ok_or_else(|| rules::no_legal_move(pos))?
        } else {
            pool.choose_move(pos, &strength, seed)?
        };
        Ok(ToolMove {
            san: rules::san(pos, m),
            uci: rules::uci(m),
            random,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_docs_and_shapes() {
        let s = ToolSet::new(ToolFamily::PhaseSpecialists);
        assert_eq!(
            s.names(Docs::Gold),
            [
                "opening_specialist",
                "middlegame_specialist",
                "endgame_specialist",
                "late_endgame_specialist"
            ]
        );
        assert_eq!(
            s.names(Docs::Opaque),
            ["function_1", "function_2", "function_3", "function_4"]
        );
        let g = ToolSet::new(ToolFamily::StrengthGradient);
        assert_eq!(g.names(Docs::Gold), ["elo_1200", "elo_1800", "elo_2400"]);
        let tools = g.openai_tools(Docs::Opaque);
        assert_eq!(tools.len(), 3);
        assert_eq!(tools[0]["type"], "function");
        assert_eq!(tools[2]["function"]["name"], "function_3");
        assert_eq!(tools[0]["function"]["description"], OPAQUE_DESCRIPTION);
        assert_eq!(
            tools[1]["function"]["parameters"],
            json!({"type": "object", "properties": {}, "required": []})
        );
        let gold = g.function_defs(Docs::Gold);
        assert!(gold[0]["description"]
            .as_str()
            .unwrap()
            .contains("1200 Elo"));
        assert_eq!(g.index_of("elo_1800", Docs::Gold), Some(1));
        assert_eq!(g.index_of("function_3", Docs::Opaque), Some(2));
        assert_eq!(g.index_of("elo_1800", Docs::Opaque), None);
        assert_eq!(g.index_of("function_4", Docs::Opaque), None);
    }

    #[test]
    fn optimal_tools() {
        let s = ToolSet::new(ToolFamily::PhaseSpecialists);
        let g = ToolSet::new(ToolFamily::StrengthGradient);
        for (fen, phase_tool) in [
            ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -", 0),
            (
                "2r2rk1/2p3bp/1pBqp3/1P1p1p2/3P2p1/P2QP1P1/2PN1PP1/R4RK1 w - -",
                1,
            ),
            ("8/3R2bk/6p1/1p3p1p/7P/3p4/5KP1/2r5 w - -", 2),
            ("8/7p/2R3r1/3kp3/5p1P/5P2/7K/8 w - -", 3),
        ] {
            let pos = rules::parse_fen(fen).unwrap();
            assert_eq!(s.optimal_tool(&pos), phase_tool, "{fen}");
            assert_eq!(g.optimal_tool(&pos), 2);
        }
    }

    #[test]
    fn off_phase_specialists_play_seeded_random_moves() {
        let s = ToolSet::new(ToolFamily::PhaseSpecialists);
        let pos = Chess::default();
        // The endgame specialist in the opening: random, no engine involved.
        assert_eq!(s.strength_for(2, &pos), Some(Strength::random()));
        assert_eq!(s.strength_for(9, &pos), None);
        let on = s.strength_for(0, &pos).unwrap();
        assert_eq!(
            on.skill,
            Some(strength::skill_level_for_elo(SPECIALIST_ELO))
        );
        let timed = ToolSet::with_search(ToolFamily::PhaseSpecialists, SearchMode::Movetime(500));
        let on = timed.strength_for(0, &pos).unwrap();
        assert_eq!(on.engine.uci_elo, Some(SPECIALIST_ELO));
    }
}
