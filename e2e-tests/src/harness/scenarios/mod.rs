//! Running a suite's scenarios and the steps they share: the objects and pods of a Memcached,
//! and who led when.

pub mod leadership;
pub mod objects;
pub mod pods;
pub mod runner;
pub mod scenario;
