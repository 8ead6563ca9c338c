import { render } from "preact";
import { App } from "./App";
import { wailsBridge } from "./bridge";
import "./style.css";

const root = document.getElementById("app");
if (root) render(<App bridge={wailsBridge()} />, root);
