//! An in-memory store with the DynamoDB adapter's semantics, for handler
//! tests, the fuzz targets and benchmarks: test support behind the
//! `test-util` feature, never used by the function itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Created, PlantStore, StoreError};
use crate::plant::{NewPlant, PlantId};

/// Clones share their plants: a test gives the handler one and reads back
/// through another.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    plants: Arc<Mutex<HashMap<PlantId, NewPlant>>>,
}

/// What a test reads back, through a clone of the store it gave the handler.
impl MemoryStore {
    /// The plant stored under `id`.
    pub fn get(&self, id: PlantId) -> Option<NewPlant> {
        self.plants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    /// How many plants are stored.
    pub fn len(&self) -> usize {
        self.plants.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether nothing was stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PlantStore for MemoryStore {
    async fn create(&self, plant: &NewPlant) -> Result<Created, StoreError> {
        let mut plants = self.plants.lock().unwrap_or_else(PoisonError::into_inner);
        match plants.get(&plant.id) {
            None => {
                plants.insert(plant.id, plant.clone());
                Ok(Created::Inserted)
            }
            Some(stored) if stored == plant => Ok(Created::Replayed),
            Some(_) => Err(StoreError::Conflict(plant.id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(name: &str, tag: Option<&str>) -> NewPlant {
        let body = match tag {
            Some(tag) => format!(r#"{{"id":1,"name":"{name}","tag":"{tag}"}}"#),
            None => format!(r#"{{"id":1,"name":"{name}"}}"#),
        };
        NewPlant::from_json(body.as_bytes()).unwrap()
    }

    #[tokio::test]
    async fn the_memory_store_replays_identical_plants_and_refuses_different_ones() {
        let store = MemoryStore::default();
        assert_eq!(
            store.create(&plant("Fern", None)).await.unwrap(),
            Created::Inserted
        );
        assert_eq!(
            store.create(&plant("Fern", None)).await.unwrap(),
            Created::Replayed
        );
        assert!(matches!(
            store.create(&plant("Fern", Some("x"))).await,
            Err(StoreError::Conflict(id)) if id.get() == 1
        ));
        assert_eq!(store.get(PlantId::from(1)), Some(plant("Fern", None)));
        assert_eq!(store.len(), 1);
    }
}
