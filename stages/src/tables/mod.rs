//! Renderers: tables, plots and exports read from the store. Each locates an
//! experiment's results the same way ([`crate::driver::locate`]: the driver in status
//! mode), so a renderer never recomputes a stage.

pub mod export;
pub mod fidelity;
pub mod plot;
pub mod report;
pub mod table2;
pub mod table3;
pub mod table4;
pub mod table5;
pub mod table7;
pub mod tokens;
