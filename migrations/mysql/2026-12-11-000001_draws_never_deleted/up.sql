-- A draw's row is never deleted: deleting it and inserting another (another draw's sealed
-- seed and commitment) would pass the write-once trigger on UPDATE. Seeds sealed since this
-- release bind their drop's id as well; this keeps the older ones, bound to their commitment
-- alone, where they were written.
CREATE TRIGGER drop_draws_are_never_deleted BEFORE DELETE ON drop_draws FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'a draw is never deleted';
