"""Typed views of an instance's payload (what the agent sees) and gold (what only judges see).

An Instance keeps its payload and gold as plain mappings: that is what the construct stage writes to
Parquet, so keys and stored data stay what they were. Each benchmark declares a `Payload` and a `Gold`
view (pydantic models, like its `Params`); the construct stage validates every instance against them
before anything is written (`check_instance`), and code reads fields through the view
(`ApebPayload.of(instance).candidates`), never by string key, so a misspelt key is an error where the
data is made, not a silent `None` three stages later.
"""
from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from perseval.core.errors import InputError
from perseval.core.instances import Instance

V = TypeVar("V", bound="View")


class View(BaseModel):
    """A read-only typed view of one part of an instance; unknown keys are kept (a release may carry more)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    part: ClassVar[Literal["payload", "gold"]] = "payload"

    @classmethod
    def of(cls: type[V], instance: Instance, where: str = "") -> V:
        """The view of `instance`'s payload or gold; InputError naming the source, instance and field if it
        does not fit (`where`: the file or build the instance came from)."""
        try:
            return cls.model_validate(getattr(instance, cls.part))
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            raise InputError(where or f"the {instance.benchmark} data",
                             f"instance {instance.instance_id!r}: {cls.part} does not fit {cls.__name__}: "
                             f"{err['msg']}", field=f"{cls.part}.{key}" if key else cls.part) from None


class PayloadView(View):
    part: ClassVar[Literal["payload", "gold"]] = "payload"


class GoldView(View):
    part: ClassVar[Literal["payload", "gold"]] = "gold"


def check_instance(instance: Instance, payload: type[PayloadView], gold: type[GoldView], where: str = "") -> None:
    """Raise InputError unless both parts of `instance` fit their views."""
    payload.of(instance, where)
    gold.of(instance, where)


class RankingPayload(PayloadView):
    """A ranking task's candidate set (APeB's products; the custom layout's ranking rows): cards with an id."""

    candidates: list[dict[str, Any]]

    @field_validator("candidates")
    @classmethod
    def _ids(cls, cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
        missing = [k for k, c in enumerate(cards) if not isinstance(c.get("id"), str)]
        if missing:
            raise ValueError(f"candidate(s) {missing} have no string 'id'")
        return cards

    @property
    def ids(self) -> list[str]:
        return [c["id"] for c in self.candidates]


class RankingGold(GoldView):
    """A ranking task's right answer: the id of the candidate the user chose (APeB's purchase; the custom
    layout's gold item)."""

    purchased: str


class ScenarioPayload(PayloadView):
    """The payload fields shared by scenario-based benchmarks (IBA): the scenario stratifies controls."""

    scenario: str = ""

    @field_validator("scenario", mode="before")
    @classmethod
    def _none_is_no_scenario(cls, value: Any) -> Any:
        return "" if value is None else value


API_ACTION = "call_api"


class ActionPayload(PayloadView):
    """An action of IBA-Bench's two types, Generate(text) and CallAPI(params) (perseval.benchmarks.actions): the
    action type and, for an API call, the API. IBA-Bench's instances and the custom layout's free-text and
    API-call instances have this shape, so one request format and one pair of judges serve both. An instance
    that names no action is free text (IBA's and the custom layout's own views require one)."""

    action_type: str = "generate"
    api: dict[str, Any] | None = None

    @property
    def is_api_call(self) -> bool:
        return self.action_type == API_ACTION


class ActionGold(GoldView):
    """What the checkpoint and slot judges read (perseval.benchmarks.action_judges): a free-text action's hidden
    checkpoints, an API call's gold slot values."""

    checkpoints: list[dict[str, Any]] = []
    slots: dict[str, Any] = {}
