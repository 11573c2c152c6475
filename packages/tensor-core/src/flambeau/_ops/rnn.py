"""Recurrent cells (lstm_cell, gru_cell, rnn cells). Being written."""

__all__: list[str] = []
