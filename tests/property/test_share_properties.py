"""Hypothesis stateful properties of a share-partition and its share coordinator.

Random members acquire, acknowledge (any type, right or wrong member), let locks expire, end
sessions, move the log start, fail the share coordinator over, while the persister delivers
writes late. After every step:
an offset is acquired by at most one member at a time; delivery counts never decrease; the
SPSO never moves back; the coordinator rebuilt from its log equals the live one; and what it
stores agrees with the leader's durable state.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from property_profile import examples
from share_support import GROUP, TOPIC, ack, make_rig

from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.share import AcknowledgeType
from kip_lab.share.config import ShareCoordinatorConfig, SharePartitionConfig
from kip_lab.share.partition import ACQUIRED, DURABLE_CODE, SharePartition

MEMBERS = st.sampled_from(["C1", "C2", "C3"])


class SharePartitionMachine(RuleBasedStateMachine):
    @initialize(
        deferred=st.booleans(),
        limit=st.integers(2, 4),
        locks=st.integers(3, 12),
        fidelity=st.sampled_from(["kafka", "kip"]),
    )
    def setup(self, deferred: bool, limit: int, locks: int, fidelity: str) -> None:
        config = SharePartitionConfig(
            delivery_count_limit=limit, partition_max_record_locks=locks, record_lock_duration_ms=1_000
        )
        self.rig = make_rig(
            config=config,
            deferred=deferred,
            start_offset=0,
            coordinator_config=ShareCoordinatorConfig(snapshot_update_records_per_snapshot=3),
            fidelity=fidelity,
        )
        self.max_dc: dict[int, int] = {}
        self.last_spso = 0

    @property
    def sp(self):
        return self.rig.sp

    @rule(count=st.integers(1, 6))
    def produce(self, count: int) -> None:
        self.rig.log.append(count)

    @rule(member=MEMBERS, max_records=st.integers(1, 8))
    def acquire(self, member: str, max_records: int) -> None:
        before = {o: self.sp.state_at(o) for o in range(self.sp.spso, self.sp.speo)}
        window, available = self.sp.speo - self.sp.spso, any(v.state == "Available" for v in self.sp.records())
        got = self.sp.acquire(member, max_records)
        if got and self.sp.config.fidelity == "kafka" and not available:
            assert window < self.sp.config.partition_max_record_locks  # Kafka's canAcquireRecords
        for r in got:
            for offset in range(r.first_offset, r.last_offset + 1):
                assert before.get(offset, ("Available", 0))[0] == "Available", f"{offset} was {before[offset]}"
                assert self.sp.owner_at(offset) == member

    @rule(
        member=MEMBERS,
        start=st.integers(0, 12),
        length=st.integers(1, 4),
        kind=st.sampled_from(list(AcknowledgeType)),
    )
    def acknowledge(self, member: str, start: int, length: int, kind: AcknowledgeType) -> None:
        first = self.sp.spso + start
        before = {o: self.sp.state_at(o) for o in range(self.sp.spso, self.sp.speo)}
        try:
            self.sp.acknowledge(member, [ack(first, first + length - 1, kind)])
        except ApiError:
            assert {o: self.sp.state_at(o) for o in range(self.sp.spso, self.sp.speo)} == before  # atomic

    @rule(ms=st.integers(1, 1_500))
    def advance(self, ms: int) -> None:
        self.rig.scheduler.advance(ms)

    @rule(member=MEMBERS)
    def end_session(self, member: str) -> None:
        self.sp.release_member(member)

    @rule(count=st.integers(1, 3))
    def deliver_writes(self, count: int) -> None:
        self.rig.persister.deliver(count)

    @rule(step=st.integers(1, 3))
    def retention(self, step: int) -> None:
        target = min(self.rig.log.log_start_offset + step, self.rig.log.high_watermark)
        self.rig.log.delete_records_before(target)
        self.sp.move_log_start()

    @rule()
    def share_coordinator_failover(self) -> None:
        self.rig.fail_over_coordinator()

    @rule()
    def leader_failover(self) -> None:
        """A new leader (epoch + 1) loads the durable state; the old one is a zombie the coordinator fences.

        Acquired records fall back to their durable state, so delivery counts may go down and
        the SPSO may step back over never-delivered records: the history restarts with the new leader.
        """
        self.rig.persister.deliver()  # the old leader's writes in flight land first (or are fenced later)
        zombie = self.sp
        self.rig.sp = SharePartition.load(
            GROUP,
            TOPIC,
            0,
            self.rig.log,
            config=zombie.config,
            scheduler=self.rig.scheduler,
            persister=self.rig.persister,
            leader_epoch=zombie.leader_epoch + 1,
        )
        self.max_dc = {}
        self.last_spso = self.sp.spso
        stale = [v for v in zombie.records() if v.state == ACQUIRED and not v.pending]
        if stale:  # the zombie still thinks it holds records: its next write is fenced
            view = next((v for v in stale if v.first_offset >= zombie.spso), stale[0])
            accept = [ack(view.first_offset, view.first_offset, AcknowledgeType.ACCEPT)]
            if view.first_offset < zombie.spso:
                # ``kafka``: only records the log start passed while Acquired. Acknowledging them writes nothing
                # (Kafka's acknowledgeBatchRecords skips offsets below the start); releasing them does (Archived).
                assert zombie.acknowledge(view.member_id, accept) is None
                write = zombie.release_member(view.member_id)
            else:
                write = zombie.acknowledge(view.member_id, accept)
            self.rig.persister.deliver()
            assert write is not None
            assert write.error is Errors.FENCED_LEADER_EPOCH and zombie.fenced is Errors.FENCED_LEADER_EPOCH

    @invariant()
    def acquired_by_one_member_with_a_lock(self) -> None:
        acquired = 0
        for view in self.sp.records():
            assert (view.state == ACQUIRED) == (view.member_id is not None)
            acquired += view.last_offset - view.first_offset + 1 if view.state == ACQUIRED else 0
        assert acquired == self.sp.acquired_count
        if self.sp.config.fidelity == "kip":  # Kafka checks its limit before a fetch, which may overshoot it
            assert acquired <= self.sp.config.partition_max_record_locks
            assert self.sp.speo - self.sp.spso <= self.sp.config.partition_max_record_locks

    @invariant()
    def delivery_counts_never_decrease_and_spso_never_moves_back(self) -> None:
        assert self.sp.spso >= self.last_spso
        self.last_spso = self.sp.spso
        for view in self.sp.records():
            for offset in range(view.first_offset, view.last_offset + 1):
                assert view.delivery_count >= self.max_dc.get(offset, 0)
                self.max_dc[offset] = view.delivery_count
                assert view.delivery_count <= self.sp.config.delivery_count_limit

    @invariant()
    def stored_state_matches_replay_and_the_leader(self) -> None:
        coordinator = self.rig.coordinator
        for rebuilt in (self.rig.rebuilt(), self.rig.rebuilt(coordinator.prunable_offset())):
            assert rebuilt.states == coordinator.states
            assert rebuilt.updates_since_snapshot == coordinator.updates_since_snapshot  # the cadence survives
        stored = coordinator.state(GROUP, TOPIC, 0)
        assert stored is not None
        mirror = self.sp.durable
        assert (stored.start_offset, stored.spans) == (mirror.start_offset, mirror.spans)
        if self.sp.pending_writes:
            return
        assert stored.start_offset <= self.sp.spso
        by_offset = {o: (s, c) for f, last, s, c in stored.spans for o in range(f, last + 1)}
        for view in self.sp.records():
            if view.state == ACQUIRED or view.delivery_count == 0:
                continue
            for offset in range(view.first_offset, view.last_offset + 1):
                assert by_offset.get(offset) == (int(DURABLE_CODE[view.state]), view.delivery_count)


SharePartitionMachine.TestCase.settings = settings(
    max_examples=examples(100), stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestSharePartitionMachine = SharePartitionMachine.TestCase
