//! Running a suite's scenarios (its parts at once, each in a process of its own) and the steps
//! they share: the objects and pods of a Memcached, the suite's controller, who led when, and what a
//! failed one left behind.

pub mod controller;
pub mod diagnosis;
pub mod leadership;
pub mod objects;
pub mod parts;
pub mod pods;
pub mod runner;
pub mod scenario;
