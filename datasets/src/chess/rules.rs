//! Chess rules on top of `shakmaty`: FEN in and out, legal moves, SAN and UCI,
//! the end of a game, and the game phase by piece count.
//!
//! FENs are parsed strictly (standard castling, no impossible material, no
//! castling rights that the board contradicts, no impossible checks): a FEN
//! that `shakmaty` would only accept after repairs is an error
//! ([`ChessError::Fen`]), so that loaders can count and skip it. The move
//! counters are optional; missing counters mean `0 1`, as in python-chess.

use std::fmt;

use shakmaty::fen::Fen;
use shakmaty::san::{San, SanPlus};
use shakmaty::uci::UciMove;
use shakmaty::zobrist::Zobrist64;
use shakmaty::{CastlingMode, Chess, Color, EnPassantMode, Move, Position};

use super::ChessError;

/// Game phase by the number of pieces on the board, kings included.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// 28 pieces or more.
    Opening,
    /// 16 to 27 pieces.
    Middlegame,
    /// 10 to 15 pieces.
    Endgame,
    /// Fewer than 10 pieces.
    LateEndgame,
}

impl Phase {
    /// The four phases, from the opening on.
    pub const ALL: [Phase; 4] = [
        Phase::Opening,
        Phase::Middlegame,
        Phase::Endgame,
        Phase::LateEndgame,
    ];

    /// The phase of a board with `pieces` pieces (kings included).
    pub fn from_piece_count(pieces: u32) -> Phase {
        match pieces {
            28.. => Phase::Opening,
            16..=27 => Phase::Middlegame,
            10..=15 => Phase::Endgame,
            _ => Phase::LateEndgame,
        }
    }

    /// The phase of a position.
    pub fn of(pos: &Chess) -> Phase {
        Phase::from_piece_count(pos.board().occupied().count() as u32)
    }

    /// `opening`, `middlegame`, `endgame`, `late_endgame` (the data files' names).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Opening => "opening",
            Phase::Middlegame => "middlegame",
            Phase::Endgame => "endgame",
            Phase::LateEndgame => "late_endgame",
        }
    }

    /// Inverse of [`Phase::as_str`].
    pub fn parse(s: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A side, serialisable as `white` / `black`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// White.
    White,
    /// Black.
    Black,
}

impl Side {
    /// Both sides, White first.
    pub const BOTH: [Side; 2] = [Side::White, Side::Black];

    /// `white` / `black`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::White => "white",
            Side::Black => "black",
        }
    }

    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::White => Side::Black,
            Side::Black => Side::White,
        }
    }

    /// The side to move in `pos`.
    pub fn to_move(pos: &Chess) -> Side {
        Side::from(pos.turn())
    }
}

impl From<Color> for Side {
    fn from(c: Color) -> Side {
        match c {
            Color::White => Side::White,
            Color::Black => Side::Black,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a FEN (with or without the two move counters) strictly.
pub fn parse_fen(fen: &str) -> Result<Chess, ChessError> {
    let bad = |reason: String| ChessError::Fen {
        fen: fen.to_owned(),
        reason,
    };
    let fields = fen.split_whitespace().count();
    if !(4..=6).contains(&fields) {
        return Err(bad(format!(
            "expected 4 to 6 space-separated fields, found {fields}"
        )));
    }
    let parsed: Fen = fen.trim().parse().map_err(|e| bad(format!("{e}")))?;
    parsed
        .into_position(CastlingMode::Standard)
        .map_err(|e| bad(e.to_string()))
}

/// What [`parse_fen_repairing`] had to change to make a FEN a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Repairs {
    /// Castling rights the board contradicts (no king or rook on its square)
    /// were dropped.
    pub castling: bool,
    /// An en passant square the board contradicts was dropped.
    pub en_passant: bool,
}

impl Repairs {
    /// Whether anything was changed.
    pub fn any(self) -> bool {
        self.castling || self.en_passant
    }
}

/// Why a FEN cannot be a position, in a few words (`too many pieces`,
/// `missing king`, ...), for counting skipped rows by reason.
pub fn position_error_reason(kinds: shakmaty::PositionErrorKinds) -> &'static str {
    use shakmaty::PositionErrorKinds as K;
    for (kind, text) in [
        (K::EMPTY_BOARD, "empty board"),
        (K::MISSING_KING, "missing king"),
        (K::TOO_MANY_KINGS, "too many kings"),
        (K::TOO_MUCH_MATERIAL, "too many pieces"),
        (K::PAWNS_ON_BACKRANK, "pawns on the first or last rank"),
        (K::OPPOSITE_CHECK, "the side not to move is in check"),
        (K::IMPOSSIBLE_CHECK, "impossible check"),
        (K::VARIANT, "not standard chess"),
    ] {
        if kinds.contains(kind) {
            return text;
        }
    }
    "illegal position"
}

/// A FEN that cannot be a position, with its short reason (see
/// [`position_error_reason`]; `not a FEN` when the text does not parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplayable {
    /// The short reason, for counting.
    pub reason: &'static str,
    /// The full error.
    pub detail: String,
}

/// Parses a FEN as [`parse_fen`] does, but repairs what the board itself
/// settles: castling rights without the king or rook on its home square, and
/// an en passant square no pawn can have just passed, are dropped (as
/// python-chess's `Board.clean_castling_rights` does for castling). Anything
/// else wrong makes it [`Unplayable`].
pub fn parse_fen_repairing(fen: &str) -> Result<(Chess, Repairs), Unplayable> {
    use shakmaty::PositionErrorKinds as K;
    let not_fen = |detail: String| Unplayable {
        reason: "not a FEN",
        detail,
    };
    let fields = fen.split_whitespace().count();
    if !(4..=6).contains(&fields) {
        return Err(not_fen(format!(
            "expected 4 to 6 space-separated fields, found {fields}"
        )));
    }
    let parsed: Fen = fen.trim().parse().map_err(|e| not_fen(format!("{e}")))?;
    match parsed.into_position::<Chess>(CastlingMode::Standard) {
        Ok(pos) => Ok((pos, Repairs::default())),
        Err(e) => {
            let kinds = e.kinds();
            let repairs = Repairs {
                castling: kinds.contains(K::INVALID_CASTLING_RIGHTS),
                en_passant: kinds.contains(K::INVALID_EP_SQUARE),
            };
            let fixable = K::INVALID_CASTLING_RIGHTS | K::INVALID_EP_SQUARE;
            if !(kinds - fixable).is_empty() {
                return Err(Unplayable {
                    reason: position_error_reason(kinds - fixable),
                    detail: e.to_string(),
                });
            }
            let pos = match e.ignore_invalid_castling_rights() {
                Ok(pos) => pos,
                Err(e) => match e.ignore_invalid_ep_square() {
                    Ok(pos) => pos,
                    Err(e) => {
                        return Err(Unplayable {
                            reason: position_error_reason(e.kinds()),
                            detail: e.to_string(),
                        })
                    }
                },
            };
            Ok((pos, repairs))
        }
    }
}

/// The full FEN of a position (with move counters; en passant square only
/// when a legal en passant capture exists, as python-chess writes it).
pub fn fen(pos: &Chess) -> String {
    Fen::from_position(pos, EnPassantMode::Legal).to_string()
}

/// The FEN without the two move counters (the data files' form).
pub fn fen_without_counters(pos: &Chess) -> String {
    shakmaty::fen::Epd::from_position(pos, EnPassantMode::Legal).to_string()
}

/// SAN with check (`+`) and mate (`#`) marks, as python-chess's `Board.san`.
pub fn san(pos: &Chess, m: Move) -> String {
    SanPlus::from_move(pos.clone(), m).to_string()
}

/// UCI notation (`e2e4`, `e7e8q`, castling as the king's move `e1g1`).
pub fn uci(m: Move) -> String {
    UciMove::from_move(m, CastlingMode::Standard).to_string()
}

/// The legal moves in SAN, in `shakmaty`'s generation order.
pub fn legal_sans(pos: &Chess) -> Vec<String> {
    pos.legal_moves().into_iter().map(|m| san(pos, m)).collect()
}

fn illegal(pos: &Chess, mv: &str, reason: impl Into<String>) -> ChessError {
    ChessError::IllegalMove {
        fen: fen(pos),
        mv: mv.to_owned(),
        reason: reason.into(),
    }
}

/// The error for a position without legal moves where a move was needed.
pub fn no_legal_move(pos: &Chess) -> ChessError {
    illegal(pos, "", "no legal move in this position")
}

/// The legal move that `text` names in SAN (check marks and annotations such
/// as `!?` are accepted and ignored).
pub fn parse_san(pos: &Chess, text: &str) -> Result<Move, ChessError> {
    let trimmed = text.trim();
    let core = trimmed.trim_end_matches(['!', '?']);
    let san: SanPlus = core
        .parse()
        .map_err(|_| illegal(pos, trimmed, "not a move in SAN"))?;
    San::to_move(san.san, pos).map_err(|e| illegal(pos, trimmed, e.to_string()))
}

/// The legal move that `text` names in UCI.
pub fn parse_uci(pos: &Chess, text: &str) -> Result<Move, ChessError> {
    let trimmed = text.trim();
    let u: UciMove = trimmed
        .parse()
        .map_err(|_| illegal(pos, trimmed, "not a move in UCI notation"))?;
    u.to_move(pos)
        .map_err(|_| illegal(pos, trimmed, "not legal here"))
}

/// Plays a legal move, returning the new position.
pub fn play(pos: &Chess, m: Move) -> Result<Chess, ChessError> {
    pos.clone()
        .play(m)
        .map_err(|e| illegal(pos, &uci(m), e.to_string()))
}

/// UCI to SAN in a position.
pub fn uci_to_san(pos: &Chess, text: &str) -> Result<String, ChessError> {
    Ok(san(pos, parse_uci(pos, text)?))
}

/// SAN to UCI in a position.
pub fn san_to_uci(pos: &Chess, text: &str) -> Result<String, ChessError> {
    Ok(uci(parse_san(pos, text)?))
}

/// How a game ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The side to move is mated.
    Checkmate,
    /// The side to move has no legal move and is not in check.
    Stalemate,
    /// Neither side can mate.
    InsufficientMaterial,
    /// 100 half-moves without capture or pawn move (150 under
    /// [`DrawRules::Automatic`]).
    FiftyMoves,
    /// The same position for the third time (fifth under [`DrawRules::Automatic`]).
    Repetition,
    /// The ply limit was reached (a draw).
    PlyLimit,
    /// The agent made no tool call (a loss).
    NoToolCall,
    /// The agent's tool call failed (a loss).
    FailedToolCall,
    /// The move played was illegal (a loss).
    IllegalMove,
}

impl EndReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Checkmate => "checkmate",
            EndReason::Stalemate => "stalemate",
            EndReason::InsufficientMaterial => "insufficient_material",
            EndReason::FiftyMoves => "fifty_moves",
            EndReason::Repetition => "repetition",
            EndReason::PlyLimit => "ply_limit",
            EndReason::NoToolCall => "no_tool_call",
            EndReason::FailedToolCall => "failed_tool_call",
            EndReason::IllegalMove => "illegal_move",
        }
    }
}

/// Which draw rules end a game by themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrawRules {
    /// 50-move rule and threefold repetition end the game at once (as if the
    /// side that may claim always claims). The default.
    #[default]
    Claimed,
    /// Only the automatic FIDE rules: 75 moves and fivefold repetition (what
    /// python-chess's `Board.is_game_over()` checks by default).
    Automatic,
}

impl DrawRules {
    fn halfmove_limit(self) -> u32 {
        match self {
            DrawRules::Claimed => 100,
            DrawRules::Automatic => 150,
        }
    }

    fn repetitions(self) -> usize {
        match self {
            DrawRules::Claimed => 3,
            DrawRules::Automatic => 5,
        }
    }
}

/// The result of a finished game.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ending {
    /// The winner; `None` for a draw.
    pub winner: Option<Side>,
    /// Why the game ended.
    pub reason: EndReason,
}

impl Ending {
    /// `1-0`, `0-1` or `1/2-1/2`.
    pub fn result_str(&self) -> &'static str {
        match self.winner {
            Some(Side::White) => "1-0",
            Some(Side::Black) => "0-1",
            None => "1/2-1/2",
        }
    }

    /// The score of `side`: 1, 0.5 or 0.
    pub fn score_for(&self, side: Side) -> f64 {
        match self.winner {
            None => 0.5,
            Some(w) if w == side => 1.0,
            Some(_) => 0.0,
        }
    }
}

/// The end of the game decided by the position alone (checkmate, stalemate,
/// insufficient material, the move-count rule), or `None`. Repetition needs
/// the history: see [`repetition_count`].
pub fn position_ending(pos: &Chess, rules: DrawRules) -> Option<Ending> {
    if pos.legal_moves().is_empty() {
        return Some(if pos.is_check() {
            Ending {
                winner: Some(Side::to_move(pos).other()),
                reason: EndReason::Checkmate,
            }
        } else {
            Ending {
                winner: None,
                reason: EndReason::Stalemate,
            }
        });
    }
    if pos.is_insufficient_material() {
        return Some(Ending {
            winner: None,
            reason: EndReason::InsufficientMaterial,
        });
    }
    if pos.halfmoves() >= rules.halfmove_limit() {
        return Some(Ending {
            winner: None,
            reason: EndReason::FiftyMoves,
        });
    }
    None
}

/// The repetition key of a position (board, side, castling, en passant).
pub fn position_key(pos: &Chess) -> u64 {
    let z: Zobrist64 = pos.zobrist_hash(EnPassantMode::Legal);
    z.0
}

/// How often `key` occurs in `history`.
pub fn repetition_count(history: &[u64], key: u64) -> usize {
    history.iter().filter(|k| **k == key).count()
}

/// The end of the game given the position and the keys of all positions so
/// far (including the current one).
pub fn game_ending(pos: &Chess, history: &[u64], rules: DrawRules) -> Option<Ending> {
    position_ending(pos, rules).or_else(|| {
        (repetition_count(history, position_key(pos)) >= rules.repetitions()).then_some(Ending {
            winner: None,
            reason: EndReason::Repetition,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";

    #[test]
    fn fen_with_and_without_counters() {
        let a = parse_fen(START).unwrap();
        let b = parse_fen("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -").unwrap();
        assert_eq!(fen(&a), START);
        assert_eq!(fen(&b), START);
        assert_eq!(
            fen_without_counters(&a),
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -"
        );
        assert_eq!(legal_sans(&a).len(), 20);
    }

    #[test]
    fn odd_fens_are_errors_not_panics() {
        for bad in [
            "",
            "garbage",
            "8/8/8/8/8/8/8/8 w - -", // empty board
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 extra", // too many fields
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQ1BNR w KQkq -", // white king missing
            "4k3/8/8/8/8/8/8/4K3 w KQ -", // castling rights without rooks
            "QQQQkQQQ/QQQQQQQQ/8/8/8/8/8/4K3 w - -", // impossible material
            "4k3/8/8/8/8/8/8/4K2R x - -",
        ] {
            let err = parse_fen(bad).unwrap_err();
            assert!(matches!(err, ChessError::Fen { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn contradicted_castling_rights_are_repaired_and_impossible_boards_are_not() {
        // No white rook on a1: White's long castling right is dropped, the rest kept.
        let (pos, r) = parse_fen_repairing("r3k2r/8/8/8/8/8/8/4K2R w KQkq - 0 1").unwrap();
        assert_eq!(
            r,
            Repairs {
                castling: true,
                en_passant: false
            }
        );
        assert_eq!(fen(&pos), "r3k2r/8/8/8/8/8/8/4K2R w Kkq - 0 1");
        let (_, r) = parse_fen_repairing("4k3/8/8/8/8/8/8/4K3 w KQ -").unwrap();
        assert!(r.castling && r.any());
        // A consistent FEN is untouched.
        let (pos, r) = parse_fen_repairing(START).unwrap();
        assert!(!r.any());
        assert_eq!(fen(&pos), START);
        // The paper's test.jsonl line 603: 23 white pieces, 15 of them queens.
        let e =
            parse_fen_repairing("r1b1kbnr/1pq3pp/8/2BpN3/5B2/R1BNQ2R/QQQ1QQQQ/RQQQKQQR w KQkq -")
                .unwrap_err();
        assert_eq!(e.reason, "too many pieces", "{e:?}");
        assert_eq!(
            parse_fen_repairing("4k3/8/8/8/8/8/8/8 w - -")
                .unwrap_err()
                .reason,
            "missing king"
        );
        assert_eq!(
            parse_fen_repairing("garbage").unwrap_err().reason,
            "not a FEN"
        );
    }

    #[test]
    fn phase_by_piece_count_including_kings() {
        assert_eq!(Phase::from_piece_count(32), Phase::Opening);
        assert_eq!(Phase::from_piece_count(28), Phase::Opening);
        assert_eq!(Phase::from_piece_count(27), Phase::Middlegame);
        assert_eq!(Phase::from_piece_count(16), Phase::Middlegame);
        assert_eq!(Phase::from_piece_count(15), Phase::Endgame);
        assert_eq!(Phase::from_piece_count(10), Phase::Endgame);
        assert_eq!(Phase::from_piece_count(9), Phase::LateEndgame);
        assert_eq!(Phase::from_piece_count(2), Phase::LateEndgame);
        // 9 pieces: two kings, rook, 6 pawns.
        let p = parse_fen("8/7p/2R3r1/3kp3/5p1P/5P2/7K/8 w - -").unwrap();
        assert_eq!(p.board().occupied().count(), 9);
        assert_eq!(Phase::of(&p), Phase::LateEndgame);
        assert_eq!(Phase::parse("late_endgame"), Some(Phase::LateEndgame));
        assert_eq!(Phase::parse("late endgame"), None);
    }

    #[test]
    fn san_and_uci_round_trip() {
        let p = parse_fen(START).unwrap();
        assert_eq!(san_to_uci(&p, "Nf3").unwrap(), "g1f3");
        assert_eq!(uci_to_san(&p, "e2e4").unwrap(), "e4");
        assert!(parse_san(&p, "e5").is_err());
        assert!(parse_uci(&p, "e2e5").is_err());
        assert!(parse_uci(&p, "zz").is_err());
        // Castling, promotion, check and mate marks.
        let c = parse_fen("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1").unwrap();
        assert_eq!(uci_to_san(&c, "e1g1").unwrap(), "O-O");
        assert_eq!(san_to_uci(&c, "O-O-O").unwrap(), "e1c1");
        let promo = parse_fen("8/4P1k1/8/8/8/8/8/4K3 w - - 0 1").unwrap();
        assert_eq!(uci_to_san(&promo, "e7e8q").unwrap(), "e8=Q");
        let mate = parse_fen("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1").unwrap();
        assert_eq!(uci_to_san(&mate, "a1a8").unwrap(), "Ra8#");
        assert_eq!(san_to_uci(&mate, "Ra8#").unwrap(), "a1a8");
        assert_eq!(san_to_uci(&mate, "Ra8!?").unwrap(), "a1a8");
    }

    #[test]
    fn endings() {
        let rules = DrawRules::Claimed;
        let mated = parse_fen("R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1").unwrap();
        assert_eq!(
            position_ending(&mated, rules),
            Some(Ending {
                winner: Some(Side::White),
                reason: EndReason::Checkmate
            })
        );
        let stale = parse_fen("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1").unwrap();
        assert_eq!(
            position_ending(&stale, rules).map(|e| e.reason),
            Some(EndReason::Stalemate)
        );
        let bare = parse_fen("7k/8/6K1/8/8/8/8/8 b - - 0 1").unwrap();
        assert_eq!(
            position_ending(&bare, rules).map(|e| e.reason),
            Some(EndReason::InsufficientMaterial)
        );
        let fifty = parse_fen("7k/8/6K1/8/8/8/8/R7 b - - 100 80").unwrap();
        assert_eq!(
            position_ending(&fifty, rules).map(|e| e.reason),
            Some(EndReason::FiftyMoves)
        );
        assert_eq!(position_ending(&fifty, DrawRules::Automatic), None);
        let live = parse_fen(START).unwrap();
        assert_eq!(position_ending(&live, rules), None);
        let k = position_key(&live);
        assert_eq!(
            game_ending(&live, &[k, 1, k, 2, k], rules).map(|e| e.reason),
            Some(EndReason::Repetition)
        );
        assert_eq!(game_ending(&live, &[k, 1, k], rules), None);
        assert_eq!(
            game_ending(&live, &[k, 1, k, 2, k], DrawRules::Automatic),
            None
        );
        let e = Ending {
            winner: Some(Side::Black),
            reason: EndReason::Checkmate,
        };
        assert_eq!(e.result_str(), "0-1");
        assert_eq!(e.score_for(Side::Black), 1.0);
        assert_eq!(e.score_for(Side::White), 0.0);
    }
}
