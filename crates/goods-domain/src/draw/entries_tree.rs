//! A draw's entry set, fixed before the reveal: the RFC 6962 Merkle tree hash over the user ids
//! in decimal ASCII, ascending; an inclusion proof (its audit path) shows an entry is in it.

use super::{BadHex, parse_hex};
use crate::UserId;
use ct_merkle::{CtMerkleTree, RootHash, inclusion::InclusionProof as CtProof};
use sha2::{Digest, Sha256};

digest!(
    /// The root of an entry set's Merkle tree (`entriesRoot`).
    EntriesRoot
);

/// A draw's entrants as the tree RFC 6962 describes, built once when entries close.
#[derive(Clone)]
pub struct EntriesTree {
    tree: CtMerkleTree<Sha256, String>,
    users: Vec<UserId>,
}

impl std::fmt::Debug for EntriesTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntriesTree")
            .field("size", &self.users.len())
            .finish_non_exhaustive()
    }
}

/// An entry's RFC 6962 audit path: the sibling hashes from its leaf up to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InclusionProof {
    /// 0-based: the entrant's place among the user ids in ascending order.
    pub leaf_index: u64,
    pub tree_size: u64,
    /// From the leaf's sibling up; empty for a tree of one leaf.
    pub audit_path: Vec<[u8; 32]>,
}

impl EntriesTree {
    /// The tree over `entrants` (any order; each user once).
    pub fn new(entrants: &[UserId]) -> Self {
        let mut users = entrants.to_vec();
        users.sort_unstable();
        users.dedup();
        let mut tree = CtMerkleTree::new();
        for user in &users {
            tree.push(user.get().to_string());
        }
        Self { tree, users }
    }

    pub fn size(&self) -> u64 {
        self.users.len() as u64
    }

    /// `MTH(D[n])`; for no entries, SHA-256 of the empty string (RFC 6962).
    pub fn root(&self) -> EntriesRoot {
        EntriesRoot(
            self.tree
                .root()
                .as_bytes()
                .as_slice()
                .try_into()
                .unwrap_or([0; 32]),
        )
    }

    /// `user`'s audit path, if `user` is an entrant.
    pub fn prove(&self, user: UserId) -> Option<InclusionProof> {
        let index = self.users.binary_search(&user).ok()?;
        let path = self.tree.prove_inclusion(index);
        Some(InclusionProof {
            leaf_index: index as u64,
            tree_size: self.size(),
            audit_path: path
                .as_bytes()
                .chunks_exact(32)
                .map(|c| c.try_into().unwrap_or([0; 32]))
                .collect(),
        })
    }
}

/// Whether `proof` shows `user`'s leaf in the tree whose root is `root`: what a buyer (and
/// `goods-server verify-draw`) checks.
pub fn verify_inclusion(root: &EntriesRoot, user: UserId, proof: &InclusionProof) -> bool {
    let (Ok(index), Ok(size)) = (
        usize::try_from(proof.leaf_index),
        usize::try_from(proof.tree_size),
    ) else {
        return false;
    };
    if index >= size {
        return false;
    }
    let bytes: Vec<u8> = proof.audit_path.iter().flatten().copied().collect();
    let root = RootHash::<Sha256>::new((*root.bytes()).into(), size);
    root.verify_inclusion(
        &user.get().to_string(),
        index,
        &CtProof::<Sha256>::from_bytes(bytes),
    )
    .is_ok()
}

/// RFC 6962's leaf hash, `SHA-256(0x00 || data)`, of `user`'s leaf.
pub fn leaf_hash(user: UserId) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([0_u8]);
    h.update(user.get().to_string().as_bytes());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(ids: impl IntoIterator<Item = i64>) -> Vec<UserId> {
        ids.into_iter().map(|i| UserId::parse(i).unwrap()).collect()
    }

    /// RFC 6962 section 2.1 written out as the RFC states it, for the comparison: no tree
    /// library, the largest power of two below n splits.
    fn mth(leaves: &[Vec<u8>]) -> [u8; 32] {
        match leaves.len() {
            0 => Sha256::digest(b"").into(),
            1 => Sha256::digest([&[0_u8][..], &leaves[0]].concat()).into(),
            n => {
                let k = split(n);
                let (l, r) = (mth(&leaves[..k]), mth(&leaves[k..]));
                Sha256::digest([&[1_u8][..], &l, &r].concat()).into()
            }
        }
    }

    /// The largest power of two smaller than `n` (n > 1).
    fn split(n: usize) -> usize {
        let mut k = 1;
        while k * 2 < n {
            k *= 2;
        }
        k
    }

    fn path(m: usize, leaves: &[Vec<u8>]) -> Vec<[u8; 32]> {
        let n = leaves.len();
        if n <= 1 {
            return Vec::new();
        }
        let k = split(n);
        if m < k {
            let mut p = path(m, &leaves[..k]);
            p.push(mth(&leaves[k..]));
            p
        } else {
            let mut p = path(m - k, &leaves[k..]);
            p.push(mth(&leaves[..k]));
            p
        }
    }

    #[test]
    fn the_root_and_every_proof_match_rfc_6962_written_out() {
        for n in 0..=33_i64 {
            // Entrants given in another order than the tree's: the tree sorts them numerically
            // (10 after 9, not after 1).
            let entrants = users((1..=n).rev().map(|i| i * 3));
            let tree = EntriesTree::new(&entrants);
            let leaves: Vec<Vec<u8>> = (1..=n).map(|i| (i * 3).to_string().into_bytes()).collect();
            assert_eq!(tree.root().bytes(), &mth(&leaves), "root of {n}");
            for (m, user) in users((1..=n).map(|i| i * 3)).into_iter().enumerate() {
                let proof = tree.prove(user).unwrap();
                assert_eq!(proof.leaf_index, m as u64);
                assert_eq!(proof.tree_size, n as u64);
                assert_eq!(proof.audit_path, path(m, &leaves), "path of {m} in {n}");
                assert!(verify_inclusion(&tree.root(), user, &proof));
            }
        }
    }

    /// Values computed independently with Python's hashlib from RFC 6962's definitions.
    #[test]
    fn the_root_matches_values_computed_outside_rust() {
        assert_eq!(
            EntriesTree::new(&[]).root().to_hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex::encode(leaf_hash(UserId::parse(1).unwrap())),
            "2215e8ac4e2b871c2a48189e79738c956c081e23ac2f2415bf77da199dfd920c"
        );
        assert_eq!(
            EntriesTree::new(&users([3, 1, 2])).root().to_hex(),
            "fe6e9d4604f578602851a2c15ef3894ca07b9517f7d5f7dedc28179ca888580d"
        );
    }

    #[test]
    fn a_proof_for_another_user_another_index_or_another_root_fails() {
        let tree = EntriesTree::new(&users(1..=10));
        let seven = UserId::parse(7).unwrap();
        let proof = tree.prove(seven).unwrap();
        assert!(verify_inclusion(&tree.root(), seven, &proof));
        assert!(!verify_inclusion(
            &tree.root(),
            UserId::parse(8).unwrap(),
            &proof
        ));
        let moved = InclusionProof {
            leaf_index: 5,
            ..proof.clone()
        };
        assert!(!verify_inclusion(&tree.root(), seven, &moved));
        let other = EntriesTree::new(&users(1..=11)).root();
        assert!(!verify_inclusion(&other, seven, &proof));
        let out_of_range = InclusionProof {
            leaf_index: 10,
            ..proof
        };
        assert!(!verify_inclusion(&tree.root(), seven, &out_of_range));
        assert_eq!(tree.prove(UserId::parse(11).unwrap()), None);
    }
}
