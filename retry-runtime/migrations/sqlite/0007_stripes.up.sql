-- PostgreSQL's migration 7 stripes its count rows by transaction. SQLite has one writer and one
-- stripe (0), so there is nothing to change: this version exists so that both backends number
-- their schemas alike.
SELECT 1;
