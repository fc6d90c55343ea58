//! The PostgreSQL backend (work in progress).
use super::{Backend, LogRetention, LoggedChange, Mark, Retire, StoreOptions};
use crate::error::{Error, Result};
use std::sync::Weak;

pub struct Postgres;

impl Postgres {
    pub fn open(_uri: &str, _options: &StoreOptions) -> Result<Postgres> {
        Err(Error::Unavailable("not yet".into()))
    }
}

impl Backend for Postgres {
    fn register_owner(&self, _owner: Weak<dyn Retire>) {}
    fn ensure_current(&mut self) -> Result<bool> {
        Ok(false)
    }
    fn retire_inherited(&mut self) {}
    fn commit_mark(&self) -> Option<Mark> {
        None
    }
    fn refresh(&self) -> Result<()> {
        Ok(())
    }
    fn data_version(&self) -> Option<u32> {
        None
    }
    fn head(&self) -> Result<Option<(u64, Option<LogRetention>)>> {
        Ok(None)
    }
    fn begin_read(&self) -> Result<()> {
        Ok(())
    }
    fn begin_write(&self) -> Result<()> {
        Ok(())
    }
    fn commit(&self) -> Result<()> {
        Ok(())
    }
    fn rollback(&self) {}
    fn read_state(&self) -> Result<Option<(Vec<u8>, u64)>> {
        Ok(None)
    }
    fn write_state(&self, _value: &[u8], _version: u64) -> Result<()> {
        Ok(())
    }
    fn log_retention(&self) -> Result<Option<LogRetention>> {
        Ok(None)
    }
    fn set_log_retention(&self, _retention: Option<LogRetention>) -> Result<()> {
        Ok(())
    }
    fn log_change(&self, _change: &LoggedChange, _retention: LogRetention) -> Result<()> {
        Ok(())
    }
    fn changes_after(&self, _after: u64) -> Result<Vec<LoggedChange>> {
        Ok(vec![])
    }
    fn change_at(&self, _version: u64) -> Result<Option<LoggedChange>> {
        Ok(None)
    }
}
